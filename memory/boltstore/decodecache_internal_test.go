package boltstore

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ctxd/ctxd/memory"
)

// The cache stays within two generations of its limit while records come
// and go, counting the decoded messages it holds and not only their
// records (compressed, a fraction of their content), and every read
// decodes to what the record says. A limit of 0 (--decode-cache-bytes=0)
// keeps nothing.
func TestDecodeCacheBounded(t *testing.T) {
	for _, limit := range []int{256 << 10, 0} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) { testDecodeCacheBounded(t, limit) })
	}
}

func testDecodeCacheBounded(t *testing.T, limit int) {
	c := newDecodeCache(limit)
	rec := func(i, v int) []byte {
		content := strings.Repeat(fmt.Sprintf("v%d ", v), 1000) // compresses well
		b, err := encodeRecord(&memory.Message{ID: fmt.Sprintf("m%d", i), Content: content}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for round := range 5 {
		for i := range 300 {
			key := []byte(fmt.Sprint(i))
			raw := rec(i, round/2) // every other round rewrites them all
			// These records name no kept-apart prompt: no tx needed.
			got, err := c.decode(nil, key, raw)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := decodeMessage(nil, nil, raw)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round %d, record %d: %+v, want %+v", round, i, got, want)
			}
			size, n := 0, len(c.cur)+len(c.prev)
			for _, g := range []map[string]*decoded{c.cur, c.prev} {
				for _, d := range g {
					size += len(d.raw) + len(d.m.Content)
				}
			}
			if size > 2*c.limitBytes || (limit == 0 && n > 0) {
				t.Fatalf("cache holds %d bytes of records and content, limit %d a generation", size, c.limitBytes)
			}
			if limit > 0 && round > 0 && n == 0 {
				t.Fatal("the cache keeps nothing") // the bound holds trivially
			}
		}
	}
}

// cloneMessage copies every field of Message that refers to memory (the
// cache's copy must not change when a caller changes its own). A field
// added to Message, or to the structs it points to, fails here until
// cloneMessage copies it.
func TestCloneMessageCoversEveryReferenceField(t *testing.T) {
	m := &memory.Message{ToolCalls: []memory.ToolCall{{ID: "c"}}, Metadata: map[string]any{"k": []any{"v"}},
		Sources: []string{"s"}, Versions: []string{"v"}, Cold: &memory.ColdInfo{}, Prune: &memory.PruneCosts{}}
	c := cloneMessage(m)
	mv, cv := reflect.ValueOf(m).Elem(), reflect.ValueOf(c).Elem()
	for i := range mv.NumField() {
		f := mv.Type().Field(i)
		switch f.Type.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map:
		default:
			continue
		}
		if f.Name == "Vector" {
			continue // read apart; cached messages have none
		}
		if mv.Field(i).IsNil() {
			t.Errorf("the test leaves Message.%s nil: set it", f.Name)
			continue
		}
		if mv.Field(i).Pointer() == cv.Field(i).Pointer() {
			t.Errorf("cloneMessage shares Message.%s with the cached message", f.Name)
		}
		if f.Type.Kind() != reflect.Map && f.Type.Elem().Kind() == reflect.Struct {
			assertNoReferences(t, f.Type.Elem()) // copied by value
		}
	}
	if m.Metadata["k"].([]any)[0] = "changed"; c.Metadata["k"].([]any)[0] != "v" {
		t.Error("cloneMessage shares nested metadata")
	}
}

// assertNoReferences fails if the struct type holds pointers, slices or
// maps: cloneMessage copies those structs by value.
func assertNoReferences(t *testing.T, typ reflect.Type) {
	t.Helper()
	for i := range typ.NumField() {
		switch f := typ.Field(i); f.Type.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
			t.Errorf("%s.%s is a reference: cloneMessage copies %s by value", typ.Name(), f.Name, typ.Name())
		case reflect.Struct:
			if f.Type != reflect.TypeFor[time.Time]() { // immutable: a value
				assertNoReferences(t, f.Type)
			}
		}
	}
}
