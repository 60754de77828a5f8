package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/ui"
	"github.com/labstack/echo/v4"
)

// TenantHeader lets an admin key act as another tenant.
const TenantHeader = api.TenantHeader

// Key is one API key. Only its sha256 is kept, so a config file may hold the
// hash instead of the key.
type Key struct {
	Tenant string
	Hash   [sha256.Size]byte
	// Admin keys act as the tenant named in TenantHeader (their own when it
	// is absent).
	Admin bool
}

// Identity is whose rate limit the key's requests are charged to.
func (k Key) Identity() string { return "key:" + hex.EncodeToString(k.Hash[:8]) }

var tenantName = regexp.MustCompile(`^[A-Za-z0-9_:-][A-Za-z0-9._:-]{0,127}$`)

// ParseKeys reads "tenant:key,tenant2:key2". A key written "sha256:HEX" is
// already hashed; the tenant "*" marks an admin key (acting as the default
// tenant unless a request names another).
func ParseKeys(s string) ([]Key, error) {
	var keys []Key
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		tenant, secret, ok := strings.Cut(part, ":")
		if !ok || secret == "" {
			return nil, fmt.Errorf("api key %q: write tenant:key", redact(part))
		}
		k, err := NewKey(tenant, secret, "", false)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// NewKey builds a key from a secret or from its hex sha256 (one of them;
// a secret written "sha256:HEX" counts as the hash). Tenant "*" makes an
// admin key of the default tenant.
func NewKey(tenant, secret, sha string, admin bool) (Key, error) {
	if tenant == "*" {
		tenant, admin = memory.DefaultTenant, true
	}
	if !tenantName.MatchString(tenant) {
		return Key{}, fmt.Errorf("api key of tenant %q: a tenant is 1 to 128 characters of [A-Za-z0-9._:-], not starting with '.'", tenant)
	}
	if h, ok := strings.CutPrefix(secret, "sha256:"); ok {
		secret, sha = "", h
	}
	k := Key{Tenant: tenant, Admin: admin}
	switch {
	case secret != "" && sha != "":
		return Key{}, fmt.Errorf("api key of tenant %q: give the key or its sha256, not both", tenant)
	case sha != "":
		b, err := hex.DecodeString(sha)
		if err != nil || len(b) != sha256.Size {
			return Key{}, fmt.Errorf("api key of tenant %q: sha256 must be 64 hex digits", tenant)
		}
		copy(k.Hash[:], b)
	case len(secret) < 16:
		return Key{}, fmt.Errorf("api key of tenant %q: use at least 16 characters", tenant)
	default:
		k.Hash = sha256.Sum256([]byte(secret))
	}
	return k, nil
}

func redact(s string) string {
	if t, _, ok := strings.Cut(s, ":"); ok {
		return t + ":***"
	}
	return "***"
}

// lookup finds the key whose hash matches. It compares against every key,
// in constant time each, so timing says nothing about which one matched.
func lookup(keys []Key, presented string) (Key, bool) {
	h := sha256.Sum256([]byte(presented))
	var found Key
	ok := 0
	for _, k := range keys {
		if subtle.ConstantTimeCompare(h[:], k.Hash[:]) == 1 {
			found, ok = k, 1
		}
	}
	return found, ok == 1
}

// admit authenticates the caller, puts its tenant in the request context and
// charges its rate limit: per key, or per client IP without keys (and for
// failed attempts, so guessing keys is rate limited too).
func (s *Server) admit(next echo.HandlerFunc) echo.HandlerFunc {
	return s.admitBy(func(r *http.Request) (string, bool) { return bearer(r.Header.Get(echo.HeaderAuthorization)) },
		"send Authorization: Bearer KEY")(next)
}

// KeyHeader carries ctxd's API key on the gateway's model endpoints, where
// Authorization (and x-api-key) belong to the upstream provider.
const KeyHeader = api.GatewayKeyHeader

// admitGateway is admit for the model endpoints: ctxd's key in KeyHeader.
func (s *Server) admitGateway(next echo.HandlerFunc) echo.HandlerFunc {
	return s.admitBy(func(r *http.Request) (string, bool) {
		k := strings.TrimSpace(r.Header.Get(KeyHeader))
		return k, k != ""
	}, "send "+KeyHeader+": KEY (Authorization is passed to the upstream)")(next)
}

// admitBy is admit with the key read by key; how says how to send it.
func (s *Server) admitBy(key func(*http.Request) (string, bool), how string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			return s.admitRequest(c, next, key, how)
		}
	}
}

func (s *Server) admitRequest(c echo.Context, next echo.HandlerFunc, key func(*http.Request) (string, bool), how string) error {
	r := c.Request()
	token, _ := key(r)
	caller, identity, err := s.authenticate("ip:"+c.RealIP(), token, r.Header.Get(TenantHeader), how)
	if err != nil {
		return err
	}
	c.Set(identityKey, identity)
	if len(s.opts.Keys) > 0 {
		c.Set(adminKey, caller.Admin)
	}
	c.SetRequest(r.WithContext(memory.NewContextWithTenant(r.Context(), caller.Tenant)))
	return next(c)
}

// authenticate checks a presented key ("" for none) and charges the rate
// limit: per key, or per client (ip) without keys and for failed attempts,
// so guessing keys is rate limited too. asked is the tenant an admin key
// asks to act as ("": its own); how says how to send a key. The API and
// the dashboard both admit through it. identity is whose allowance was
// charged, for requests that carry more than one call (chargeMore).
func (s *Server) authenticate(ip, token, asked, how string) (caller ui.Caller, identity string, err error) {
	caller = ui.Caller{Tenant: memory.DefaultTenant}
	if len(s.opts.Keys) == 0 {
		return caller, ip, s.charge(ip, nil)
	}
	if token == "" {
		return caller, ip, s.charge(ip, memory.Errorf(memory.EUNAUTHORIZED, "missing API key: %s", how))
	}
	k, ok := lookup(s.opts.Keys, token)
	if !ok {
		return caller, ip, s.charge(ip, memory.Errorf(memory.EUNAUTHORIZED, "unknown API key"))
	}
	caller = ui.Caller{Tenant: k.Tenant, Admin: k.Admin}
	identity = k.Identity()
	if err := s.charge(identity, nil); err != nil {
		return caller, identity, err
	}
	if asked != "" && asked != caller.Tenant {
		if !k.Admin {
			return caller, identity, memory.Errorf(memory.EFORBIDDEN, "this key belongs to another tenant; only an admin key may act as %q", asked)
		}
		if !tenantName.MatchString(asked) {
			return caller, identity, memory.Errorf(memory.EINVALID, "%s: not a valid tenant name", TenantHeader)
		}
		caller.Tenant = asked
	}
	return caller, identity, nil
}

// identityKey holds, in the echo context, whose rate limit an admitted
// request was charged to.
const identityKey = "ctxd.identity"

// chargeMore takes n more requests from the allowance of the caller
// admitted on c: a request that carries n+1 calls (an MCP batch) costs
// what n+1 requests do.
func (s *Server) chargeMore(c echo.Context, n int) error {
	identity, _ := c.Get(identityKey).(string)
	for range n {
		if err := s.charge(identity, nil); err != nil {
			return err
		}
	}
	return nil
}

// uiAdmit admits the dashboard's requests with the API's keys.
func (s *Server) uiAdmit(r *http.Request, key, asTenant string) (ui.Caller, error) {
	caller, _, err := s.authenticate("ip:"+s.e.IPExtractor(r), key, asTenant, "log in at /ui/login with an API key")
	return caller, err
}

// charge takes one request from identity's allowance: a 429 when it is
// spent, else err (the outcome the request already has).
func (s *Server) charge(identity string, err error) error {
	if s.limiter == nil {
		return err
	}
	if ok, _ := s.limiter.Allow(identity); !ok {
		return memory.Errorf(memory.ERATELIMITED, "rate limit of %g requests/s exceeded; retry later", s.opts.RateLimit)
	}
	return err
}

func bearer(h string) (string, bool) {
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// unauthorizedHeader tells clients which scheme to use, as RFC 9110 asks.
func unauthorizedHeader(c echo.Context, status int) {
	if status == http.StatusUnauthorized {
		c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="ctxd"`)
	}
}
