package boltstore

import bolt "go.etcd.io/bbolt"

// How the file is laid out, measured on 10 replayed coding-agent runs
// (1.41 MB of content): the file was 16.8 MB for 8.8 MB of pages.
//
//   - bbolt grows the file by AllocSize past its last page, 16 MiB by
//     default (the mmap is 64 MiB from the start, so the power-of-two
//     sizing below AllocSize never applies): a new data dir was a 16 MiB
//     file from its first write. growStep grows it by a sixty-fourth of
//     its size instead, at least 256 KiB and at most the old 16 MiB: the
//     slack past the last page stays under 2% (an eighth left 3.5 MB of a
//     34.5 MB file after replaying 71 runs; a sixteenth up to 1 MB of a
//     16.8 MB one, 0.1 byte per byte of content) and a file grows ~440
//     times on its way to 1 GB (each growth is an ftruncate and an fsync;
//     every commit fsyncs anyway, ~5,600 of them in those 71 runs).
//   - bbolt splits a full page in two halves (FillPercent 0.5). Keys that
//     only ever grow (message ids are ULIDs, change seqs count up, a
//     session's seqs count up) then leave every page half empty: ids and
//     vectors were 48% full, changes 47%. Those buckets fill pages up to
//     fillAppendOnly; messages, whose records are also rewritten in place
//     (a state change), keep some room so that a record grown by a few
//     bytes does not split its page.
const (
	minGrowStep = 256 << 10
	maxGrowStep = 16 << 20

	fillAppendOnly = 1.0
	fillMessages   = 0.9
)

var fillPercent = map[string]float64{
	string(bucketIDs):      fillAppendOnly,
	string(bucketVectors):  fillAppendOnly,
	string(bucketChanges):  fillAppendOnly,
	string(bucketMessages): fillMessages,
}

// growStep is how much the file grows by when it is full at size bytes.
func growStep(size int64) int {
	return int(min(max(size/64, minGrowStep), maxGrowStep))
}

// layoutTx sets a write transaction's bucket fill and the file's growth
// step. bbolt reads both when the transaction commits, on this goroutine,
// under the writer lock the transaction holds.
func layoutTx(tx *bolt.Tx) {
	for name, fill := range fillPercent {
		if b := tx.Bucket([]byte(name)); b != nil {
			b.FillPercent = fill
		}
	}
	tx.DB().AllocSize = growStep(tx.Size())
}
