package boltstore

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ctxd/ctxd/memory"
	bolt "go.etcd.io/bbolt"
)

func openInternal(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(path, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Check(); err != nil {
			t.Error(err)
		}
		s.Close()
	})
	return s
}

func newSess(tenant, id string) func() *memory.Session {
	return func() *memory.Session {
		return &memory.Session{Tenant: tenant, ID: id, ContextWindow: 100000, Encoding: memory.EncodingO200k}
	}
}

// corpus makes messages like a coding agent's: commands, and tool outputs
// of code, paths and listings drawn from a limited vocabulary (Zipf), so
// they compress about as real ones do. Deterministic for a seed.
type corpus struct {
	rng   *rand.Rand
	zipf  *rand.Zipf
	words []string
}

func newCorpus(seed uint64) *corpus {
	rng := rand.New(rand.NewPCG(seed, 1))
	var words []string
	parts := []string{"query", "model", "field", "order", "union", "values", "compiler", "sql", "test", "db", "utils",
		"form", "admin", "migrations", "fields", "related", "lookup", "expression", "aggregate", "manager"}
	for i := 0; i < 600; i++ {
		a, b := parts[rng.IntN(len(parts))], parts[rng.IntN(len(parts))]
		switch i % 4 {
		case 0:
			words = append(words, a+"_"+b)
		case 1:
			words = append(words, "django/"+a+"/"+b+".py")
		case 2:
			words = append(words, strings.ToUpper(a[:1])+a[1:]+strings.ToUpper(b[:1])+b[1:])
		default:
			words = append(words, fmt.Sprint(rng.IntN(2000)))
		}
	}
	words = append(words, "def", "self", "return", "if", "not", "in", "for", "None", "=", "(", ")", ":", "import", "from")
	return &corpus{rng: rng, zipf: rand.NewZipf(rng, 1.2, 2, uint64(len(words)-1)), words: words}
}

func (c *corpus) line() string {
	n := 3 + c.rng.IntN(9)
	ws := make([]string, n)
	for i := range ws {
		ws[i] = c.words[c.zipf.Uint64()]
	}
	return strings.Repeat("    ", c.rng.IntN(3)) + strings.Join(ws, " ")
}

func (c *corpus) text(lines int) string {
	var b strings.Builder
	for range lines {
		b.WriteString(c.line())
		b.WriteByte('\n')
	}
	return b.String()
}

// turn is an assistant message with a command and its tool result.
func (c *corpus) turn(i int, at time.Time) []*memory.Message {
	call := fmt.Sprintf("call_%d", i)
	args, _ := json.Marshal(map[string]string{"command": "grep -rn " + c.words[c.zipf.Uint64()] + " django/"})
	return []*memory.Message{
		{ID: fmt.Sprintf("a%05d", i), Role: memory.RoleAssistant, Content: "THOUGHT: " + c.line(), Tokens: 40,
			State: memory.StateActive, CreatedAt: at,
			ToolCalls: []memory.ToolCall{{ID: call, Type: "function", Function: memory.FunctionCall{Name: "bash", Arguments: string(args)}}}},
		{ID: fmt.Sprintf("r%05d", i), Role: memory.RoleTool, ToolCallID: call, Tokens: 400, State: memory.StateActive,
			CreatedAt: at, Content: "<returncode>0</returncode>\n<output>\n" + c.text(5+c.rng.IntN(60)) + "</output>"},
	}
}

func contentBytes(m *memory.Message) int {
	n := len(m.Content)
	for _, tc := range m.ToolCalls {
		n += len(tc.Function.Name) + len(tc.Function.Arguments)
	}
	return n
}

// A record comes back as it was written, compressed or not, with its cold
// prompt kept apart or inline.
func TestRecordRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := openInternal(t, filepath.Join(t.TempDir(), "ctxd.db"))
	c := newCorpus(1)
	at := time.Unix(1700000000, 0).UTC()
	long := c.text(20)
	cases := []*memory.Message{
		{ID: "short", Role: memory.RoleUser, Content: "hi", State: memory.StateActive, CreatedAt: at},
		{ID: "long", Role: memory.RoleTool, Content: c.text(50), State: memory.StateActive, CreatedAt: at,
			Metadata: map[string]any{"k": []any{"v", 1.5}}},
		{ID: "cold", Role: memory.RoleTool, Content: c.text(50), State: memory.StateDropped, CreatedAt: at,
			Cold: &memory.ColdInfo{DropReason: memory.ReasonBudget, PromptAtDrop: long, DroppedAt: at}},
		{ID: "coldshort", Role: memory.RoleTool, Content: "x", State: memory.StateDropped, CreatedAt: at,
			Cold: &memory.ColdInfo{DropReason: memory.ReasonBudget, PromptAtDrop: "why"}},
	}
	if _, err := s.Append(ctx, "t", "s", newSess("t", "s"), cases); err != nil {
		t.Fatal(err)
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		for _, want := range cases {
			key := tx.Bucket(bucketIDs).Get([]byte(want.ID))
			raw := tx.Bucket(bucketMessages).Get(key)
			flags, ref, _, err := recordParts(raw)
			if err != nil {
				return err
			}
			if flags&flagZstd == 0 {
				t.Errorf("%s: not compressed (%d bytes)", want.ID, len(raw))
			}
			if apart := ref != nil; apart != (want.ID == "cold") {
				t.Errorf("%s: prompt kept apart %v", want.ID, apart)
			}
			got, err := decodeMessage(tx, nil, raw)
			if err != nil {
				return err
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: decoded\n%+v\nwant\n%+v", want.ID, got, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Left uncompressed when zstd would not make it smaller.
	js, _ := json.Marshal(cases[0])
	if got, err := decodeMessage(nil, nil, append([]byte{recordV1, 0}, js...)); err != nil || !reflect.DeepEqual(got, cases[0]) {
		t.Errorf("uncompressed record: %+v, %v", got, err)
	}
	for _, bad := range [][]byte{nil, {recordV1}, {recordV1, 0x80}, {recordV1, flagPromptApart, 1, 2}, {7, 0, '{', '}'}, {recordV1, flagZstd, 1, 2, 3}} {
		if _, err := decodeMessage(nil, nil, bad); err == nil {
			t.Errorf("damaged record %v decoded", bad)
		}
	}
}

// Records written before this format (bare JSON, the prompt inline) read
// as before, through every path, and rewriting or deleting them counts the
// kept-apart prompts right.
func TestOldFormatRecordsRead(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ctxd.db")
	s := openInternal(t, path)
	prompt := strings.Repeat("what went wrong with the union query? ", 10)
	at := time.Unix(1700000000, 0).UTC()
	old := []*memory.Message{
		{ID: "o1", Role: memory.RoleTool, Content: "old one", State: memory.StateDropped, Tokens: 5, CreatedAt: at,
			Cold: &memory.ColdInfo{DropReason: memory.ReasonBudget, PromptAtDrop: prompt, DroppedAt: at}},
		{ID: "o2", Role: memory.RoleUser, Content: "old two", State: memory.StateActive, Tokens: 5, CreatedAt: at},
	}
	if _, err := s.Append(ctx, "t", "s", newSess("t", "s"), old); err != nil {
		t.Fatal(err)
	}
	// Write them back as the previous version did: json.Marshal, nothing else.
	err := s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketPrompts).Delete(promptKey("t", "s", promptRef(prompt))); err != nil {
			return err
		}
		for _, m := range old {
			b, err := json.Marshal(m)
			if err != nil {
				return err
			}
			if err := tx.Bucket(bucketMessages).Put(messageKey("t", "s", m.Seq), b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := countKeys(t, s, bucketPrompts); n != 0 {
		t.Fatalf("%d prompts before any new-format record", n)
	}
	listed, err := s.Messages(ctx, "t", "s", memory.MessageQuery{})
	if err != nil || len(listed) != 2 || !reflect.DeepEqual(listed[0].Cold, old[0].Cold) || listed[1].Content != "old two" {
		t.Fatalf("Messages = %+v, %v", listed, err)
	}
	byID, err := s.MessagesByID(ctx, "t", []string{"o1"}, false)
	if err != nil || len(byID) != 1 || byID[0].Cold.PromptAtDrop != prompt {
		t.Fatalf("MessagesByID = %+v, %v", byID, err)
	}
	// Rewriting an old record: no prompt to release, one acquired.
	_, err = s.Update(ctx, "t", "s", func(tx memory.SessionTx) error {
		m, err := tx.Message("o1")
		if err != nil {
			return err
		}
		m.State = memory.StateRecovered
		return tx.Put(m)
	})
	if err != nil {
		t.Fatal(err)
	}
	if refs := promptRefs(t, s, "t", "s", prompt); refs != 1 {
		t.Fatalf("after rewriting the old record the prompt has %d references, want 1", refs)
	}
	// Deleting an old record (o2) releases nothing; deleting o1 now does.
	_, err = s.Update(ctx, "t", "s", func(tx memory.SessionTx) error {
		if err := tx.Delete("o2"); err != nil {
			return err
		}
		return tx.Delete("o1")
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := countKeys(t, s, bucketPrompts); n != 0 {
		t.Fatalf("%d prompts left after deleting every message", n)
	}
}

// The messages one compaction drops share its prompt: one entry, counted,
// gone with the last record that names it, whichever way that goes.
func TestPromptSharedAndReleased(t *testing.T) {
	ctx := context.Background()
	s := openInternal(t, filepath.Join(t.TempDir(), "ctxd.db"))
	c := newCorpus(2)
	at := time.Unix(1700000000, 0).UTC()
	var all []*memory.Message
	for i := range 10 {
		all = append(all, c.turn(i, at)...)
	}
	if _, err := s.Append(ctx, "t", "s", newSess("t", "s"), all); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "t", "other", newSess("t", "other"), c.turn(99, at)); err != nil {
		t.Fatal(err)
	}
	drop := func(sid, prompt string, ids ...string) {
		t.Helper()
		_, err := s.Update(ctx, "t", sid, func(tx memory.SessionTx) error {
			for _, id := range ids {
				m, err := tx.Message(id)
				if err != nil {
					return err
				}
				m.State = memory.StateDropped
				m.Cold = &memory.ColdInfo{DropReason: memory.ReasonBudget, PromptAtDrop: prompt, DroppedAt: at}
				if err := tx.Put(m); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	p1, p2 := c.text(30), c.text(30)
	drop("s", p1, "a00000", "r00000", "a00001", "r00001")
	drop("other", p1, "a00099")
	if refs := promptRefs(t, s, "t", "s", p1); refs != 4 {
		t.Fatalf("p1 in s: %d references, want 4", refs)
	}
	// Dropped again by a later compaction: the old prompt loses them.
	drop("s", p2, "a00001", "r00001")
	if r1, r2 := promptRefs(t, s, "t", "s", p1), promptRefs(t, s, "t", "s", p2); r1 != 2 || r2 != 2 {
		t.Fatalf("references p1 %d, p2 %d; want 2 and 2", r1, r2)
	}
	got, err := s.MessagesByID(ctx, "t", []string{"r00000", "r00001"}, false)
	if err != nil || len(got) != 2 || got[0].Cold.PromptAtDrop != p1 || got[1].Cold.PromptAtDrop != p2 {
		t.Fatalf("prompts read back wrong: %v", err)
	}
	// Same prompt again (recovered, rewritten): the count stays.
	drop("s", p1, "a00000")
	if refs := promptRefs(t, s, "t", "s", p1); refs != 2 {
		t.Fatalf("p1 after rewriting with the same prompt: %d references, want 2", refs)
	}
	_, err = s.Update(ctx, "t", "s", func(tx memory.SessionTx) error { return tx.Delete("r00000") })
	if err != nil {
		t.Fatal(err)
	}
	if refs := promptRefs(t, s, "t", "s", p1); refs != 1 {
		t.Fatalf("p1 after a delete: %d references, want 1", refs)
	}
	if err := s.DeleteSession(ctx, "t", "s"); err != nil {
		t.Fatal(err)
	}
	if n := countKeys(t, s, bucketPrompts); n != 1 {
		t.Fatalf("%d prompts after deleting session s, want the other session's 1", n)
	}

	// Check sees a count that is off (and the cleanup's Check the repair).
	setRefs := func(n uint64) {
		t.Helper()
		err := s.db.Update(func(tx *bolt.Tx) error {
			key := promptKey("t", "other", promptRef(p1))
			_, packed, err := splitPromptEntry(tx.Bucket(bucketPrompts).Get(key))
			if err != nil {
				return err
			}
			return tx.Bucket(bucketPrompts).Put(key, promptEntry(n, packed))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	setRefs(2)
	if err := s.Check(); err == nil || !strings.Contains(err.Error(), "counts 2 records, 1 name it") {
		t.Fatalf("Check with a wrong count = %v", err)
	}
	setRefs(1)
}

// On a synthetic coding-agent corpus, written and compacted as ctxd does
// (tool outputs dropped by compactions that each quote a 2,000-character
// prompt; some recovered and dropped again), the file is a small multiple of
// the content: records compressed, prompts shared, pages filled, the file
// grown in steps that follow its size.
func TestStoreSizeOnAgentCorpus(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ctxd.db")
	s := openInternal(t, path)
	c := newCorpus(3)
	at := time.Unix(1700000000, 0).UTC()
	content, jsonBytes := 0, 0
	for sn := range 4 {
		sid := fmt.Sprintf("run%d", sn)
		var ids []string
		for i := range 60 {
			turn := c.turn(sn*1000+i, at)
			for _, m := range turn {
				content += contentBytes(m)
				ids = append(ids, m.ID)
			}
			if _, err := s.Append(ctx, "t", sid, newSess("t", sid), turn); err != nil {
				t.Fatal(err)
			}
			if i%10 != 9 {
				continue
			}
			// A compaction: the oldest still-active ones go cold, with
			// this compaction's prompt; two earlier ones come back.
			prompt := c.text(100)[:2000]
			_, err := s.Update(ctx, "t", sid, func(tx memory.SessionTx) error {
				for k, id := range ids[:len(ids)-12] {
					m, err := tx.Message(id)
					if err != nil {
						return err
					}
					switch {
					case m.State == memory.StateActive || m.State == memory.StateRecovered:
						m.State = memory.StateDropped
						m.Cold = &memory.ColdInfo{DropReason: memory.ReasonBudget, PromptAtDrop: prompt, DroppedAt: at}
					case k%7 == i%7:
						m.State = memory.StateRecovered
					default:
						continue
					}
					if err := tx.Put(m); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	var records int
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMessages).ForEach(func(_, v []byte) error {
			records += len(v)
			m, err := decodeMessage(tx, nil, v)
			if err != nil {
				return err
			}
			b, _ := json.Marshal(m)
			jsonBytes += len(b)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	size := s.Size()
	t.Logf("content %d bytes; records %d bytes (as JSON %d: %.2fx); file %d bytes (%.2f per byte of content)",
		content, records, jsonBytes, float64(jsonBytes)/float64(records), size, float64(size)/float64(content))
	// As measured when this was written: records 5.2x smaller than their
	// JSON (which alone was 2.2 bytes per byte of content), the file 1.31
	// bytes per byte of content.
	if float64(records) > 0.3*float64(jsonBytes) {
		t.Errorf("records are %d bytes, their JSON %d: want at most 30%%", records, jsonBytes)
	}
	if float64(size) > 1.6*float64(content) {
		t.Errorf("the file is %d bytes for %d of content: want at most 1.6 per byte", size, content)
	}
}

func countKeys(t *testing.T, s *Store, bucket []byte) int {
	t.Helper()
	n := 0
	if err := s.db.View(func(tx *bolt.Tx) error { n = tx.Bucket(bucket).Stats().KeyN; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

func promptRefs(t *testing.T, s *Store, tenant, session, prompt string) uint64 {
	t.Helper()
	var refs uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketPrompts).Get(promptKey(tenant, session, promptRef(prompt)))
		if v != nil {
			refs, _ = binary.Uvarint(v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return refs
}

// Records and sessions are written by encoding/json and read by the v2
// decoder (unmarshalJSON): every field must read back exactly as
// encoding/json reads it, nested metadata, times, cold and prune records
// included, and JSON the v2 decoder alone would refuse (duplicate names,
// invalid UTF-8, names in another case) must read as before.
func TestRecordDecodesAsEncodingJSON(t *testing.T) {
	c := newCorpus(3)
	at := time.Date(2026, 3, 4, 5, 6, 7, 891011121, time.FixedZone("x", 3600))
	pin := 120
	var docs [][]byte
	for i := range 20 {
		for _, m := range c.turn(i, at) {
			m.Metadata = map[string]any{"n": float64(i), "tags": []any{"a", 1.5, nil, true}, "nested": map[string]any{"k": "v"}}
			m.Cold = &memory.ColdInfo{DropReason: "low_relevance", RelevanceScore: 0.25, PromptAtDrop: "why?", DroppedAt: at, RecoverableUntil: at.Add(time.Hour)}
			m.Prune = &memory.PruneCosts{}
			m.Sources, m.Versions, m.Anchor, m.Turn, m.ClientID = []string{"x", "y"}, []string{"v1"}, 7, i, "c"
			js, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			docs = append(docs, js)
		}
	}
	sess := &memory.Session{Tenant: "t", ID: "s", ContextWindow: 9000, Metadata: map[string]any{"a": []any{1.0}}, PinnedTokens: &pin,
		CreatedAt: at, UpdatedAt: at, Prunable: map[string]memory.PruneEntry{"m": {}}}
	sjs, err := json.Marshal(sess)
	if err != nil {
		t.Fatal(err)
	}
	odd := [][]byte{
		[]byte(`{"id":"a","role":"user","role":"system","content":"x"}`),
		[]byte("{\"id\":\"b\",\"content\":\"bad \xff utf8\"}"),
		[]byte(`{"ID":"c","Content":"case","Metadata":{"k":1}}`),
	}
	for _, js := range append(append(docs, odd...), sjs) {
		for _, v := range []func() any{func() any { return new(memory.Message) }, func() any { return new(memory.Session) }} {
			want, got := v(), v()
			errWant, errGot := json.Unmarshal(js, want), unmarshalJSON(js, got)
			if (errWant == nil) != (errGot == nil) || !reflect.DeepEqual(want, got) {
				t.Fatalf("%s:\nencoding/json %+v (%v)\nunmarshalJSON %+v (%v)", js, want, errWant, got, errGot)
			}
		}
	}
}
