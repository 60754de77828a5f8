package boltstore

import (
	"encoding/json"
	"runtime"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"github.com/ctxd/ctxd/memory"
)

// benchRecords are the JSON of 200 messages of the synthetic agent corpus
// (half assistant calls, half tool outputs of 5 to 65 lines).
func benchRecords(b *testing.B) [][]byte {
	c := newCorpus(9)
	at := time.Unix(1700000000, 0).UTC()
	var out [][]byte
	for i := range 100 {
		for _, m := range c.turn(i, at) {
			js, err := json.Marshal(m)
			if err != nil {
				b.Fatal(err)
			}
			out = append(out, js)
		}
	}
	return out
}

// The codecs compared for message records, on the same records: bytes per
// record (B/rec), JSON bytes per stored byte (ratio), time per record.
// Decoding includes json.Unmarshal, as a read does.
func BenchmarkRecordCodec(b *testing.B) {
	recs := benchRecords(b)
	fastest := must(zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest)))
	codecs := []struct {
		name string
		enc  func([]byte) []byte
		dec  func([]byte) ([]byte, error)
	}{
		{"json", func(b []byte) []byte { return b }, func(b []byte) ([]byte, error) { return b, nil }},
		{"snappy", func(b []byte) []byte { return snappy.Encode(nil, b) }, func(b []byte) ([]byte, error) { return snappy.Decode(nil, b) }},
		{"zstd-fastest", func(b []byte) []byte { return fastest.EncodeAll(b, nil) }, func(b []byte) ([]byte, error) { return zdec.DecodeAll(b, nil) }},
		{"zstd-default", func(b []byte) []byte { return zenc.EncodeAll(b, nil) }, func(b []byte) ([]byte, error) { return zdec.DecodeAll(b, nil) }},
	}
	for _, c := range codecs {
		var raw, stored int
		enc := make([][]byte, len(recs))
		for i, r := range recs {
			enc[i] = c.enc(r)
			raw += len(r)
			stored += len(enc[i])
		}
		b.Run(c.name+"/encode", func(b *testing.B) {
			defer cpuPerOp(b)()
			for i := 0; b.Loop(); i++ {
				c.enc(recs[i%len(recs)])
			}
			b.ReportMetric(float64(stored)/float64(len(recs)), "B/rec")
			b.ReportMetric(float64(raw)/float64(stored), "ratio")
		})
		b.Run(c.name+"/decode", func(b *testing.B) {
			defer cpuPerOp(b)()
			for i := 0; b.Loop(); i++ {
				js, err := c.dec(enc[i%len(enc)])
				if err != nil {
					b.Fatal(err)
				}
				var m memory.Message
				if err := json.Unmarshal(js, &m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// cpuPerOp reports the CPU time the benchmark's thread spent per op
// (cpu-ns/op): on a shared machine wall time also counts the waits for a
// core. Call as defer cpuPerOp(b)().
func cpuPerOp(b *testing.B) func() {
	runtime.LockOSThread()
	start := threadCPU(b)
	return func() {
		b.ReportMetric(float64(threadCPU(b)-start)/float64(b.N), "cpu-ns/op")
		runtime.UnlockOSThread()
	}
}

func threadCPU(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		b.Skip("no per-thread CPU time here:", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
