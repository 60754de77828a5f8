package admin_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/memory/admin"
)

// mutateExport re-encodes exportFile's records with fn applied to each.
func mutateExport(t *testing.T, fn func(*admin.ExportRecord)) []byte {
	t.Helper()
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	sc := bufio.NewScanner(bytes.NewReader(exportFile(t)))
	for sc.Scan() {
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.UseNumber()
		var rec admin.ExportRecord
		if err := dec.Decode(&rec); err != nil {
			t.Fatal(err)
		}
		fn(&rec)
		if err := enc.Encode(rec); err != nil {
			t.Fatal(err)
		}
	}
	return out.Bytes()
}

// An import refuses, before it writes anything, a record the API could
// never have stored: each of these was written (a tenant "" or a long one
// wrote the whole store, then failed, leaving a data dir neither serve nor
// verify opened).
func TestImportRefusesInvalidRecords(t *testing.T) {
	onMessage := func(id string, fn func(m *admin.ExportRecord)) func(*admin.ExportRecord) {
		return func(r *admin.ExportRecord) {
			if r.Message != nil && r.Message.ID == id {
				fn(r)
			}
		}
	}
	ofTenant := func(tenant string) func(*admin.ExportRecord) {
		return func(r *admin.ExportRecord) {
			if r.Session != nil && r.Session.Tenant == "acme" {
				r.Session.Tenant = tenant
			}
			if r.Message != nil && r.Message.Tenant == "acme" {
				r.Message.Tenant = tenant
			}
		}
	}
	for _, tc := range []struct {
		name string
		fn   func(*admin.ExportRecord)
		says string
	}{
		{"ErrTenantEmpty", ofTenant(""), "tenant"},
		{"ErrTenantTooLong", ofTenant(strings.Repeat("t", 200)), "tenant"},
		{"ErrRole", onMessage("acme-2", func(r *admin.ExportRecord) { r.Message.Role = "root" }), "role"},
		{"ErrNegativeTokens", onMessage("acme-2", func(r *admin.ExportRecord) { r.Message.Tokens = -5 }), "negative"},
		{"ErrIDWithNUL", onMessage("acme-2", func(r *admin.ExportRecord) { r.Message.ID = "acme\x002" }), "NUL"},
		{"ErrIDWithSlash", onMessage("acme-2", func(r *admin.ExportRecord) { r.Message.ID = "../acme-2" }), "'/'"},
		{"ErrVectorLength", onMessage("acme-2", func(r *admin.ExportRecord) { r.Vector = []float32{0.6, 0.8} }), "dimensions"},
		{"ErrColdStateWithoutColdInfo", onMessage("acme-1", func(r *admin.ExportRecord) { r.Message.Cold = nil }), "cold info"},
		{"ErrOtherSession", onMessage("acme-2", func(r *admin.ExportRecord) { r.Message.SessionID = "elsewhere" }), "follows session"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, st, _, _ := openAdmin(t, t.TempDir())
			ctx := context.Background()
			_, err := a.Import(ctx, bytes.NewReader(mutateExport(t, tc.fn)), admin.ImportOptions{})
			if memory.ErrorCode(err) != memory.EINVALID || !strings.Contains(memory.ErrorMessage(err), tc.says) {
				t.Fatalf("import: %v, want invalid_request saying %q", err, tc.says)
			}
			if tenants, err := st.Tenants(ctx); err != nil || len(tenants) != 0 {
				t.Fatalf("the refused import wrote tenants %v (%v)", tenants, err)
			}
		})
	}
}
