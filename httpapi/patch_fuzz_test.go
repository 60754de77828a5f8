package httpapi

import (
	"context"
	"testing"

	"github.com/ctxd/ctxd/memory"
)

// FuzzPatchMessage fuzzes the body of PATCH /v1/messages/{id} on a message
// of its own session: whatever the body, the answer is below 500 and in
// API.md's shape, and a 200 answers the message.
func FuzzPatchMessage(f *testing.F) {
	testServer(f)
	res, err := shared.svc.Append(context.Background(), "fz-patch", []*memory.Message{{Role: memory.RoleUser, Content: "the patch target"}})
	if err != nil {
		f.Fatal(err)
	}
	id := res.IDs[0]
	addSeeds(f,
		`{"content":"edited"}`, `{"pinned":true}`, `{"pinned":false,"important":true}`, `{"metadata":{"k":"v","n":1}}`,
		`{"metadata":null}`, `{"metadata":{}}`, `{"content":""}`, `{"content":null}`, `{"content":5}`, `{"pinned":"yes"}`,
		`{"role":"tool"}`, `{"pined":true}`, `{"content":"a","content":"b"}`, `{"metadata":{"a":{"b":1}}}`,
		`{"metadata":{"":1}}`, `{"metadata":[1]}`, `{"content":"\u0000"}`, `{"content":"<|endoftext|>"}`,
	)
	f.Fuzz(func(t *testing.T, body []byte) {
		a := fuzzBody(t, "PATCH", "/v1/messages/"+id, body)
		if a.status == 200 && a.body["id"] != id {
			t.Fatalf("200 answers another message: %.300s", a.raw)
		}
	})
}
