package simd

import "golang.org/x/sys/cpu"

// Enabled selects the assembly. It is a variable so that tests can compare
// the assembly with Go; set it only while no scan runs.
var Enabled = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// dotRowsSIMD is DotRows in AVX2+FMA assembly (dot_amd64.s). The caller
// checks len(rows) >= len(out)*len(q) and len(q) > 0.
//
//go:noescape
func dotRowsSIMD(q, rows, out []float32)

// dotRowsInt8SIMD is DotRowsInt8 in AVX2 assembly (dot8_amd64.s), with the
// same preconditions as dotRowsSIMD.
//
//go:noescape
func dotRowsInt8SIMD(q []int16, rows []int8, out []int32)
