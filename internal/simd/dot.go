// Package simd holds the dot-product kernels of the vector scans: one query
// against many rows stored back to back, in float32 or int8. On amd64 with
// AVX2 and FMA they run in assembly; elsewhere, and when Enabled is false, in
// Go.
package simd

// DotRows writes into out[i] the dot product of q with the i-th row of rows
// (len(q) floats each): the inner loop of a flat vector scan. On amd64 with
// AVX2 and FMA it runs in assembly: scalar Go spent ~0.5 ns a dimension
// (7 ms at 100k 100-d rows), eight lanes at a time ~0.1 ns. It panics if
// rows holds fewer than len(out) rows.
func DotRows(q, rows, out []float32) {
	dim := len(q)
	if len(rows) < len(out)*dim {
		panic("simd.DotRows: rows shorter than len(out)*len(q)")
	}
	if Enabled && dim > 0 {
		dotRowsSIMD(q, rows, out)
		return
	}
	DotRowsGeneric(q, rows, out)
}

// DotRowsGeneric is DotRows in Go. The assembly adds in another order, so
// the two can differ in the last bits.
func DotRowsGeneric(q, rows, out []float32) {
	dim := len(q)
	for i := range out {
		out[i] = dot(q, rows[i*dim:(i+1)*dim])
	}
}

// DotRowsInt8 is DotRows for quantised rows. It is exact, in both versions,
// while the sum of |q[j]*row[j]| of every row stays below 2^31 (the int32
// it adds in); the caller bounds q for that, as 128*max|q|*len(q) < 2^31
// does.
func DotRowsInt8(q []int16, rows []int8, out []int32) {
	dim := len(q)
	if len(rows) < len(out)*dim {
		panic("simd.DotRowsInt8: rows shorter than len(out)*len(q)")
	}
	if Enabled && dim > 0 {
		dotRowsInt8SIMD(q, rows, out)
		return
	}
	DotRowsInt8Generic(q, rows, out)
}

// DotRowsInt8Generic is DotRowsInt8 in Go.
func DotRowsInt8Generic(q []int16, rows []int8, out []int32) {
	dim := len(q)
	for i := range out {
		var s int32
		for j, x := range rows[i*dim : (i+1)*dim] {
			s += int32(x) * int32(q[j])
		}
		out[i] = s
	}
}

// dot is the dot product of two vectors of the same length, unrolled by 4.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}
