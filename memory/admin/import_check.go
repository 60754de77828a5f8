package admin

import (
	"regexp"
	"strings"

	"github.com/ctxd/ctxd/memory"
)

// TenantPattern is the rule for tenant names (the API keys' tenants).
const TenantPattern = `^[A-Za-z0-9_:-][A-Za-z0-9._:-]{0,127}$`

var tenantPattern = regexp.MustCompile(TenantPattern)

// maxMessageID bounds an imported message id: ids are ctxd's ULIDs (26
// characters) or earlier ctxd's ids, never long.
const maxMessageID = 128

// checkImported refuses, in the check pass before anything is written, an
// imported session or message the API could never have stored: a tenant
// name outside TenantPattern ("" or a very long one wrote the whole store
// and then failed, leaving a data dir that neither serve nor verify
// opened), a role not of the four, a negative token count, an id with a
// NUL or a "/" (ids are keys and file names) or too long, a vector of the
// wrong length, a message of another session than the one it follows, or
// a cold state without its cold info.
func (c *exportCheck) checkImported(rec *ExportRecord, line int) error {
	switch rec.Type {
	case RecordSession:
		s := rec.Session
		if !tenantPattern.MatchString(s.Tenant) {
			return memory.Errorf(memory.EINVALID, "export line %d: session %q: tenant %q is not 1 to 128 characters of A-Z a-z 0-9 . _ : - not starting with '.'",
				line, s.ID, memory.Truncate(s.Tenant, 140))
		}
		c.sess = s
	case RecordMessage:
		m := rec.Message
		bad := func(format string, args ...any) error {
			return memory.Errorf(memory.EINVALID, "export line %d: message %q: "+format, append([]any{line, memory.Truncate(m.ID, 140)}, args...)...)
		}
		switch {
		case c.sess == nil:
			return memory.Errorf(memory.EINVALID, "export line %d: a message before any session", line)
		case len(m.ID) > maxMessageID || strings.ContainsAny(m.ID, "\x00/") || strings.TrimSpace(m.ID) != m.ID:
			return bad("an id is at most %d bytes, without NUL, '/' or surrounding spaces", maxMessageID)
		case (m.Tenant != "" && m.Tenant != c.sess.Tenant) || (m.SessionID != "" && m.SessionID != c.sess.ID):
			return bad("it names session %q of tenant %q but follows session %q of tenant %q", m.SessionID, m.Tenant, c.sess.ID, c.sess.Tenant)
		case !m.Role.Valid():
			return bad("role %q is not system, user, assistant or tool", m.Role)
		case m.Tokens < 0:
			return bad("tokens %d is negative", m.Tokens)
		case !m.InWindow() && m.Cold == nil:
			return bad("state %s without its cold info", m.State)
		case len(rec.Vector) > 0 && c.hdr.EmbedDim > 0 && len(rec.Vector) != c.hdr.EmbedDim:
			return bad("its vector has %d dimensions, the export's model %d", len(rec.Vector), c.hdr.EmbedDim)
		}
	}
	return nil
}
