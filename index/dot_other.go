//go:build !amd64

package index

var useSIMD = false

func dotRowsSIMD(q, rows, out []float32) { dotRowsGeneric(q, rows, out) }

func dotRowsInt8SIMD(q []int16, rows []int8, out []int32) { dotRowsInt8Generic(q, rows, out) }
