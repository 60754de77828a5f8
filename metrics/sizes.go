package metrics

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"
)

// Sizes read what is on disk when Prometheus scrapes. The binary supplies
// them, so this package needs to know nothing of bbolt or Bleve. A nil func
// leaves its metric out.
type Sizes struct {
	StoreBytes    func() (int64, error)
	IndexBytes    func() (int64, error)
	IndexCounts   func() (docs, vectors uint64, err error)
	ColdBytes     func() (int64, error)
	EventLogBytes func() (int64, error)
}

// WatchSizes reports s at every scrape.
func (m *Metrics) WatchSizes(s Sizes) {
	m.reg.MustRegister(&sizeCollector{s: s})
}

var (
	descStoreBytes = prometheus.NewDesc(namespace+"_store_size_bytes", "Size of the store file (ctxd.db).", nil, nil)
	descIndexBytes = prometheus.NewDesc(namespace+"_index_size_bytes", "Size of the full-text index on disk.", nil, nil)
	descIndexDocs  = prometheus.NewDesc(namespace+"_index_documents", "Messages in the full-text index.", nil, nil)
	descVectors    = prometheus.NewDesc(namespace+"_index_vectors", "Vectors in the vector index.", nil, nil)
	descColdBytes  = prometheus.NewDesc(namespace+"_cold_storage_size_bytes", "Size of the cold-storage mirror (cold/).", nil, nil)
	descEventBytes = prometheus.NewDesc(namespace+"_event_log_size_bytes", "Size of the event logs (logs/), rotations included.", nil, nil)
)

type sizeCollector struct{ s Sizes }

func (c *sizeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []struct {
		set  bool
		desc *prometheus.Desc
	}{
		{c.s.StoreBytes != nil, descStoreBytes}, {c.s.IndexBytes != nil, descIndexBytes},
		{c.s.IndexCounts != nil, descIndexDocs}, {c.s.IndexCounts != nil, descVectors},
		{c.s.ColdBytes != nil, descColdBytes}, {c.s.EventLogBytes != nil, descEventBytes},
	} {
		if d.set {
			ch <- d.desc
		}
	}
}

func (c *sizeCollector) Collect(ch chan<- prometheus.Metric) {
	bytes := func(desc *prometheus.Desc, f func() (int64, error)) {
		if f == nil {
			return
		}
		n, err := f()
		if err != nil {
			ch <- prometheus.NewInvalidMetric(desc, err)
			return
		}
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(n))
	}
	bytes(descStoreBytes, c.s.StoreBytes)
	bytes(descIndexBytes, c.s.IndexBytes)
	bytes(descColdBytes, c.s.ColdBytes)
	bytes(descEventBytes, c.s.EventLogBytes)
	if c.s.IndexCounts != nil {
		docs, vecs, err := c.s.IndexCounts()
		if err != nil {
			ch <- prometheus.NewInvalidMetric(descIndexDocs, err)
			ch <- prometheus.NewInvalidMetric(descVectors, err)
			return
		}
		ch <- prometheus.MustNewConstMetric(descIndexDocs, prometheus.GaugeValue, float64(docs))
		ch <- prometheus.MustNewConstMetric(descVectors, prometheus.GaugeValue, float64(vecs))
	}
}

// FileBytes is the size of one file; a missing file is 0.
func FileBytes(path string) func() (int64, error) {
	return func() (int64, error) {
		fi, err := os.Stat(path)
		if errors.Is(err, fs.ErrNotExist) {
			return 0, nil
		}
		if err != nil {
			return 0, fmt.Errorf("stat %s: %w", path, err)
		}
		return fi.Size(), nil
	}
}

// DefaultMaxFiles bounds a directory walk: cold/ holds a file per session
// with cold chunks, and a scrape must not turn into a long crawl.
const DefaultMaxFiles = 100_000

// DirBytes is the total size of the files under dir, walking at most
// maxFiles entries (DefaultMaxFiles if <= 0); past that it gives up with an
// error rather than report a partial sum as the size. A missing dir is 0.
func DirBytes(dir string, maxFiles int) func() (int64, error) {
	if maxFiles <= 0 {
		maxFiles = DefaultMaxFiles
	}
	errTooMany := fmt.Errorf("%s holds more than %d entries: not summed", dir, maxFiles)
	return func() (int64, error) {
		var total int64
		seen := 0
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil // removed while we walked, or dir itself missing
				}
				return err
			}
			if seen++; seen > maxFiles {
				return errTooMany
			}
			if !d.Type().IsRegular() {
				return nil
			}
			fi, err := d.Info()
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			total += fi.Size()
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("size of %s: %w", dir, err)
		}
		return total, nil
	}
}
