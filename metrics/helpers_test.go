package metrics_test

import (
	"testing"

	"github.com/ctxd/ctxd/metrics"
	dto "github.com/prometheus/client_model/go"
)

// series gathers the series of one metric family whose labels include
// labels; nil if there is none.
func series(t *testing.T, m *metrics.Metrics, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.Metric {
			if hasLabels(s, labels) {
				return s
			}
		}
	}
	return nil
}

func hasLabels(s *dto.Metric, want map[string]string) bool {
	n := 0
	for _, l := range s.Label {
		if v, ok := want[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(want)
}

// counter is a counter's value (0 if the series does not exist).
func counter(t *testing.T, m *metrics.Metrics, name string) float64 {
	t.Helper()
	return series(t, m, name, nil).GetCounter().GetValue()
}

// histogramCount is a histogram's sample count (0 if the series does not exist).
func histogramCount(t *testing.T, m *metrics.Metrics, name string, labels map[string]string) uint64 {
	t.Helper()
	return series(t, m, name, labels).GetHistogram().GetSampleCount()
}
