package pgstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/ctxd/ctxd/memory/pgstore/pgtest"
	"github.com/ctxd/ctxd/memory/storetest"
)

// BenchmarkAppendsAcrossSessions appends one message at a time from
// parallel writers, each to sessions of its own: writes that share no row
// and that only the change feed could order one behind the other. Run it
// against a server with fsync on (CTXD_TEST_POSTGRES) to see commits wait
// on one another: -cpu sets the writers (GOMAXPROCS x parallelism 4).
func BenchmarkAppendsAcrossSessions(b *testing.B) {
	s, err := Open(context.Background(), pgtest.DSN(b), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var writer atomic.Int64
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		w := writer.Add(1)
		i := 0
		for pb.Next() {
			i++
			id := fmt.Sprintf("w%d", w)
			msgs := storetest.Msgs(fmt.Sprintf("w%d-%d", w, i), 1)
			if _, err := s.Append(context.Background(), "t", id, storetest.NewSession("t", id), msgs); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
