#include "textflag.h"

// func dotRowsInt8SIMD(q []int16, rows []int8, out []int32)
// For each of len(out) rows of len(q) int8s: out[i] = q . row i, in int32
// (exact while the sum of |q[j]*row[j]| stays below 2^31: see DotRowsInt8).
// 32 per step in two accumulators, then 16, then one at a time.
TEXT ·dotRowsInt8SIMD(SB), NOSPLIT, $0-72
	MOVQ q_base+0(FP), SI
	MOVQ q_len+8(FP), CX
	MOVQ rows_base+24(FP), DI
	MOVQ out_base+48(FP), DX
	MOVQ out_len+56(FP), R8
	MOVQ CX, R9
	ANDQ $-16, R9

row:
	TESTQ R8, R8
	JZ    done
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	XORQ  AX, AX

loop32:
	LEAQ      32(AX), BX
	CMPQ      BX, R9
	JG        loop16
	VPMOVSXBW (DI)(AX*1), Y2
	VPMOVSXBW 16(DI)(AX*1), Y3
	VPMADDWD  (SI)(AX*2), Y2, Y2
	VPMADDWD  32(SI)(AX*2), Y3, Y3
	VPADDD    Y2, Y0, Y0
	VPADDD    Y3, Y1, Y1
	MOVQ      BX, AX
	JMP       loop32

loop16:
	CMPQ      AX, R9
	JGE       reduce
	VPMOVSXBW (DI)(AX*1), Y2
	VPMADDWD  (SI)(AX*2), Y2, Y2
	VPADDD    Y2, Y0, Y0
	ADDQ      $16, AX

reduce:
	VPADDD       Y1, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDD       X1, X0, X0
	VPHADDD      X0, X0, X0
	VPHADDD      X0, X0, X0
	VMOVD        X0, R10

tail:
	CMPQ    AX, CX
	JGE     store
	MOVBQSX (DI)(AX*1), R11
	MOVWQSX (SI)(AX*2), R12
	IMULQ   R12, R11
	ADDL    R11, R10
	INCQ    AX
	JMP     tail

store:
	MOVL R10, (DX)
	ADDQ $4, DX
	ADDQ CX, DI
	DECQ R8
	JMP  row

done:
	VZEROUPPER
	RET
