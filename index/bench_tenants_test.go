package index

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ctxd/ctxd/memory"
)

// BenchmarkSearchTenants runs BenchmarkSearch's 10k queries of tenant "t"
// in an index a second tenant shares (another 10k generated messages, the
// same sessions' names): a search there scores by its tenant's statistics,
// where a single-tenant index uses Bleve's own.
func BenchmarkSearchTenants(b *testing.B) {
	bi := tenantsBenchIndex(b)
	for _, scope := range []string{"cross", "single"} {
		for _, mode := range []string{memory.ModeHybrid, memory.ModeText} {
			b.Run(fmt.Sprintf("10k+10k/%s/%s", scope, mode), func(b *testing.B) {
				runSearchBench(b, bi, searchVariant{scope, mode, "", 0})
			})
		}
	}
}

var tenantsBench struct {
	sync.Once
	bi *benchIndex
}

// tenantsBenchIndex builds the two-tenant index once per run; TestMain
// closes and removes it with the others.
func tenantsBenchIndex(b *testing.B) *benchIndex {
	tenantsBench.Do(func() {
		c := newCorpus(42)
		msgs := c.messages("t", 10_000, 100, benchDim, t0)
		other := newCorpus(43).messages("u", 10_000, 100, benchDim, t0)
		for _, m := range other {
			m.ID = "u" + m.ID // ids are unique across tenants, as ULIDs are
		}
		texts := textsOf(append(msgs, other...))
		dir := b.TempDir()
		x, err := Open(filepath.Join(dir, "idx"), Options{Texts: texts})
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < len(msgs); i += 1000 {
			batch := append(msgs[i:i+1000:i+1000], other[i:i+1000]...)
			if err := x.Apply(context.Background(), memory.IndexBatch{Upserts: batch, Watermark: uint64(i + 1)}); err != nil {
				b.Fatal(err)
			}
		}
		waitForMerges(b, x)
		tenantsBench.bi = &benchIndex{x: x, n: len(msgs), corpus: c, texts: texts}
		benchIndexes.Lock()
		benchIndexes.m[-1] = tenantsBench.bi // closed by TestMain
		benchIndexes.Unlock()
	})
	if tenantsBench.bi == nil {
		b.Fatal("two-tenant bench index failed to build")
	}
	return tenantsBench.bi
}
