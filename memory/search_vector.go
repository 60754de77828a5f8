package memory

import (
	"context"
	"sync"
)

// blankCosine is the cosine to the vector of the empty text above which a
// query's vector says nothing: the embedded GloVe model gives every text
// without a word it knows ("9464", "zzqx-9912", "") one and the same vector,
// so such a query scored every empty tool result at similarity 1.0 and they
// filled 7-8 of the top 10 hybrid results. An API model maps an unknown id
// somewhere of its own, far from the empty text, and keeps its vector.
const blankCosine = 0.9999

// blankVector caches the embedding of the empty text, per model.
type blankVector struct {
	mu    sync.Mutex
	model string
	vec   []float32
}

// queryVector embeds a query for the vector side of a search, or returns
// nil when its vector is the empty text's: it knows no word of the query,
// and the text side alone ranks.
func (s *Service) queryVector(ctx context.Context, query string) ([]float32, error) {
	vecs, err := s.embed(ctx, []string{query})
	if err != nil {
		return nil, err
	}
	blank, err := s.blank.get(ctx, s)
	if err != nil {
		return nil, err
	}
	if dot(vecs[0], blank) >= blankCosine {
		return nil, nil
	}
	return vecs[0], nil
}

func (b *blankVector) get(ctx context.Context, s *Service) ([]float32, error) {
	model := s.Embedder.Model()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.vec != nil && b.model == model {
		return b.vec, nil
	}
	vecs, err := s.embed(ctx, []string{""})
	if err != nil {
		return nil, err
	}
	b.model, b.vec = model, vecs[0]
	return b.vec, nil
}
