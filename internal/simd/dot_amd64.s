#include "textflag.h"

// func dotRowsSIMD(q, rows, out []float32)
// For each of len(out) rows of len(q) floats: out[i] = q . row i.
// 16 floats per step in two accumulators, then 8, then one at a time.
TEXT ·dotRowsSIMD(SB), NOSPLIT, $0-72
	MOVQ q_base+0(FP), SI
	MOVQ q_len+8(FP), CX
	MOVQ rows_base+24(FP), DI
	MOVQ out_base+48(FP), DX
	MOVQ out_len+56(FP), R8
	MOVQ CX, R9
	ANDQ $-8, R9 // dim rounded down to a multiple of 8

row:
	TESTQ R8, R8
	JZ    done
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	XORQ   AX, AX

loop16:
	LEAQ 16(AX), BX
	CMPQ BX, R9
	JG   loop8
	VMOVUPS     (SI)(AX*4), Y2
	VMOVUPS     32(SI)(AX*4), Y3
	VFMADD231PS (DI)(AX*4), Y2, Y0
	VFMADD231PS 32(DI)(AX*4), Y3, Y1
	MOVQ        BX, AX
	JMP         loop16

loop8:
	CMPQ        AX, R9
	JGE         reduce
	VMOVUPS     (SI)(AX*4), Y2
	VFMADD231PS (DI)(AX*4), Y2, Y0
	ADDQ        $8, AX

reduce:
	VADDPS       Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0

tail:
	CMPQ        AX, CX
	JGE         store
	VMOVSS      (SI)(AX*4), X2
	VFMADD231SS (DI)(AX*4), X2, X0
	INCQ        AX
	JMP         tail

store:
	VMOVSS X0, (DX)
	ADDQ   $4, DX
	LEAQ   (DI)(CX*4), DI
	DECQ   R8
	JMP    row

done:
	VZEROUPPER
	RET
