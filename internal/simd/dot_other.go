//go:build !amd64

package simd

// Enabled is false: there is no assembly for this architecture.
var Enabled = false

func dotRowsSIMD(q, rows, out []float32) { DotRowsGeneric(q, rows, out) }

func dotRowsInt8SIMD(q []int16, rows []int8, out []int32) { DotRowsInt8Generic(q, rows, out) }
