package servertest

import (
	"net/http"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scrape fetches url's /metrics over HTTP, as Prometheus does, and parses it.
func Scrape(tb testing.TB, url string) map[string]*dto.MetricFamily {
	tb.Helper()
	res, err := http.Get(url + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		tb.Fatalf("GET /metrics = %d", res.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		tb.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// MetricValue sums the series of a family whose labels include want: the
// counter or gauge value, or the sample count of a histogram.
func MetricValue(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	var sum float64
	f := fams[name]
	if f == nil {
		return 0
	}
next:
	for _, m := range f.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if labels[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum
}
