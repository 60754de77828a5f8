package index

// dotRows writes into out[i] the dot product of q with the i-th row of rows
// (len(q) floats each): the inner loop of the flat vector scan. On amd64
// with AVX2 and FMA it runs in assembly: scalar Go spent ~0.5 ns a dimension
// (7 ms at 100k 100-d rows), eight lanes at a time ~0.1 ns.
func dotRows(q, rows, out []float32) {
	dim := len(q)
	if len(rows) < len(out)*dim {
		panic("dotRows: rows shorter than out*len(q)")
	}
	if useSIMD && dim > 0 {
		dotRowsSIMD(q, rows, out)
		return
	}
	dotRowsGeneric(q, rows, out)
}

func dotRowsGeneric(q, rows, out []float32) {
	dim := len(q)
	for i := range out {
		out[i] = dot(q, rows[i*dim:(i+1)*dim])
	}
}

// dotRowsInt8 is dotRows for quantised rows, exact in int32.
func dotRowsInt8(q []int16, rows []int8, out []int32) {
	dim := len(q)
	if len(rows) < len(out)*dim {
		panic("dotRowsInt8: rows shorter than out*len(q)")
	}
	if useSIMD && dim > 0 {
		dotRowsInt8SIMD(q, rows, out)
		return
	}
	dotRowsInt8Generic(q, rows, out)
}

func dotRowsInt8Generic(q []int16, rows []int8, out []int32) {
	dim := len(q)
	for i := range out {
		var s int32
		for j, x := range rows[i*dim : (i+1)*dim] {
			s += int32(x) * int32(q[j])
		}
		out[i] = s
	}
}
