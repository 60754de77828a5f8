//go:build !amd64

package index

var useSIMD = false

func dotRowsSIMD(q, rows, out []float32) { dotRowsGeneric(q, rows, out) }
