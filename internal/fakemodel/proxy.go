package fakemodel

import (
	"net/http"
	"sync"
)

// Refuser is an HTTP proxy that refuses everything: set as a client's
// HTTPS_PROXY, HTTP_PROXY and ALL_PROXY, it turns every outside call the
// client attempts (telemetry, updates, model lists) into a 403 it records,
// so a test sees the attempt and nothing leaves the machine.
type Refuser struct {
	mu       sync.Mutex
	attempts []string
}

// ServeHTTP refuses a CONNECT tunnel or a plain proxied request alike.
func (p *Refuser) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	target := r.Host
	if r.Method != http.MethodConnect {
		target = r.URL.String()
	}
	p.mu.Lock()
	p.attempts = append(p.attempts, r.Method+" "+target)
	p.mu.Unlock()
	http.Error(w, "outside traffic is refused in this test", http.StatusForbidden)
}

// Attempts returns every call refused so far, as "METHOD target".
func (p *Refuser) Attempts() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.attempts...)
}
