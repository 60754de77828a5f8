package index

import "math"

// The cross-session scan reads every row of the tenant; at 100k 100-d rows
// that is 40 MB of float32 per query, and with AVX2 the scan waits on memory
// (~3 ms per query on the shared 2-core machine). So each row also has an
// int8 copy (a quarter of the bytes) with its scale: the scan scores the
// int8 rows, and computes the exact float32 score only for a row whose
// approximate score plus a bound on the quantisation error could still
// enter the top n. The result is the exact scan's, row for row.

// quantSlack covers what quantBound does not: float32 rounding in the exact
// dot product and in the approximate score (~1e-6 for unit vectors).
const quantSlack = 1e-4

// quantizeRow writes into codes row's int8 codes, round(row[i]/scale) with
// scale = max|row[i]|/127, and returns scale and the L1 norm of row.
func quantizeRow(row []float32, codes []int8) (scale, l1 float32) {
	var mx, sum float64
	for _, x := range row {
		a := math.Abs(float64(x))
		mx = max(mx, a)
		sum += a
	}
	if mx == 0 {
		clear(codes[:len(row)])
		return 0, 0
	}
	s := mx / 127
	for i, x := range row {
		codes[i] = int8(max(-127, min(127, math.Round(float64(x)/s))))
	}
	return float32(s), float32(sum)
}

// quantQuery is a query vector quantised like the rows but finer, in
// int16 (the width the assembly multiplies in), with the terms of its error
// bound.
type quantQuery struct {
	codes []int16
	scale float64
	// The error of a row's approximate score is at most
	// rowScale*a + rowL1*b: see quantBound.
	a, b float64
}

// queryLevels is the largest code of a query of dim dimensions: as fine as
// int16 allows while the int32 sum of dim products with int8 codes cannot
// overflow. A fine query halves the error bound against an int8 one, and
// so the rows to rescore.
func queryLevels(dim int) float64 {
	return float64(min(math.MaxInt16, math.MaxInt32/(127*max(dim, 1))))
}

// quantizeQuery quantises the unit vector q.
func quantizeQuery(q []float32) *quantQuery {
	var mx, l1 float64
	for _, x := range q {
		a := math.Abs(float64(x))
		mx = max(mx, a)
		l1 += a
	}
	qq := &quantQuery{codes: make([]int16, len(q))}
	if mx == 0 {
		return qq
	}
	levels := queryLevels(len(q))
	qq.scale = mx / levels
	for i, x := range q {
		qq.codes[i] = int16(max(-levels, min(levels, math.Round(float64(x)/qq.scale))))
	}
	// With row r = sr*c + e (|e_i| <= sr/2) and query q = sq*d + f
	// (|f_i| <= sq/2), r.q - sr*sq*(c.d) = sq*(e.d) + r.f, so
	// |error| <= sr/2 * sum|sq*d_i| + sq/2 * sum|r_i|
	//         <= sr/2 * (|q|_1 + dim*sq/2) + sq/2 * |r|_1.
	qq.a = (l1 + float64(len(q))*qq.scale/2) / 2
	qq.b = qq.scale / 2
	return qq
}

// approx is the approximate score of a row with int8 dot product acc, scale
// and L1 norm, and the most by which the exact score can exceed it. A row
// whose codes are exact (its vector is codes times a scale, as the store
// keeps it: see collection.put) has no error of its own (e = 0 above,
// float32 rounding aside, which quantSlack covers): only the query's,
// sq/2 * |r|_1. That bound is ~100 times tighter for 100-d rows; with the
// row's term, a search in one session of 10,000 rows rescored most of them
// exactly, a cost that grew with the session.
func (qq *quantQuery) approx(acc int32, scale, l1 float32, exactCodes bool) (score, bound float64) {
	s := float64(scale)
	bound = float64(l1)*qq.b + quantSlack
	if !exactCodes {
		bound += s * qq.a
	}
	return float64(acc) * s * qq.scale, bound
}

// int8Codes writes into codes the int8 codes of vec when vec is exactly
// float32(code)*scale for some scale, as a vector decoded from the store's
// int8 record is, and returns that scale. The store's scale is max|v|/127
// of the vector it encoded; vec's largest element is 127 times it, rounded
// to float32, so the scale is found within a float32 step of max|vec|/127.
func int8Codes(vec []float32, codes []int8) (float32, bool) {
	var mx float64
	for _, x := range vec {
		mx = max(mx, math.Abs(float64(x)))
	}
	if mx == 0 {
		clear(codes[:len(vec)])
		return 0, true
	}
	s := float32(mx / 127)
	for _, c := range [...]float32{s, math.Nextafter32(s, 0), math.Nextafter32(s, math.MaxFloat32)} {
		if codesOf(vec, c, codes) {
			return c, true
		}
	}
	return 0, false
}

// codesOf writes vec's codes at scale s and reports whether they give vec
// back exactly.
func codesOf(vec []float32, s float32, codes []int8) bool {
	for i, x := range vec {
		c := math.Round(float64(x) / float64(s))
		if c < -127 || c > 127 || float32(int8(c))*s != x {
			return false
		}
		codes[i] = int8(c)
	}
	return true
}

// normFactor is what normalize multiplies vec by.
func normFactor(vec []float32) float64 {
	var sum float64
	for _, x := range vec {
		sum += float64(x) * float64(x)
	}
	if sum == 0 || math.Abs(sum-1) < 1e-9 {
		return 1
	}
	return float64(float32(1 / math.Sqrt(sum)))
}

// l1 is the L1 norm of row.
func l1(row []float32) float32 {
	var sum float64
	for _, x := range row {
		sum += math.Abs(float64(x))
	}
	return float32(sum)
}
