package memory

// DigestCostOf exposes digestCost to the external tests (the tokenizer
// package imports memory, so an internal test cannot import it): lines are
// joined with newlines, those with cached[i] set counted through a named
// text's line cache.
func DigestCostOf(tok Tokenizer, enc string, lines []string, cached []bool) (int, error) {
	segs := make([]digestSeg, len(lines))
	for i, l := range lines {
		segs[i] = digestSeg{text: l + "\n"}
		if nm := namesOf(l); cached[i] && len(nm.lines) == 1 && nm.lines[0] == l {
			segs[i].n = nm
		}
	}
	var counts *countCache
	if len(cached) > 0 && cached[0] {
		counts = &countCache{}
	}
	return digestCost(tok, enc, segs, counts)
}

// Ratios is how many sessions' calibrations the gateway keeps.
func (g *Gateway) Ratios() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.ratios)
}

const MaxRatios = maxRatios

// Ratio is the session's calibration.
func (g *Gateway) Ratio(tenant, session string) float64 { return g.ratio(tenant, session) }

// HoldBuild makes a new node's background index build (indexbuild.go)
// take steps of n messages and wait for a value on gate before each; the
// returned func restores both.
func HoldBuild(n int, gate <-chan struct{}) func() {
	batch, slice, before := buildBatch, buildSlice, beforeBuildStep
	buildBatch, buildSlice, beforeBuildStep = n, n, func() { <-gate }
	return func() { buildBatch, buildSlice, beforeBuildStep = batch, slice, before }
}
