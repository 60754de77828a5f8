package index

import (
	"context"
	"fmt"
	"testing"

	"github.com/ctxd/ctxd/memory"
)

// BenchmarkVectorSearchStoreRows scans 100,000 rows over 100 sessions for
// the top k, as the server holds them: the store's int8 vectors (the other
// search benchmarks index float32 vectors, which keep their float32 rows),
// alike as sentence vectors are (a shared direction), so that many rows
// score close to the k-th. On the shared 2-core machine, k=10 / k=50:
// 9.0-10.5 / 13.5-18.0 ms per search when those rows were bounded by their
// own quantisation error too; 1.0-3.9 / 2.5-7.5 ms bounded by the query's
// alone (quant.go).
//
//	go test -run '^$' -bench VectorSearchStoreRows -benchtime 200x ./index/
func BenchmarkVectorSearchStoreRows(b *testing.B) {
	const dim, rows, sessions = 100, 100_000, 100
	x := openTest(b, Options{})
	msgs := make([]*memory.Message, rows)
	for i := range msgs {
		msgs[i] = &memory.Message{ID: fmt.Sprintf("m%06d", i), Tenant: "t", SessionID: fmt.Sprintf("s%03d", i%sessions),
			Role: memory.RoleUser, State: memory.StateActive, CreatedAt: t0, Vector: storeRoundTrip(alikeVec(fmt.Sprint("row", i), dim))}
	}
	if err := x.vec.upsert(msgs); err != nil {
		b.Fatal(err)
	}
	for _, k := range []int{10, 50} {
		b.Run(fmt.Sprint("k", k), func(b *testing.B) {
			i := 0
			for b.Loop() {
				i++
				q := memory.SearchQuery{Tenant: "t", Vector: alikeVec(fmt.Sprint("q", i), dim), K: k}
				if _, err := x.vec.search(context.Background(), &q, k, 2); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
