#include "textflag.h"

// func copyNT(dst, src *byte, n int)
//
// Copies n bytes, a multiple of 64, from src to dst, which is aligned to
// 64 bytes, with non-temporal stores (MOVNTDQ): the destination's lines
// are written around the caches instead of read into them first. SFENCE
// orders the stores before whatever the caller does next.
TEXT ·copyNT(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

loop:
	CMPQ CX, $64
	JB   done
	MOVOU 0(SI), X0
	MOVOU 16(SI), X1
	MOVOU 32(SI), X2
	MOVOU 48(SI), X3
	MOVNTO X0, 0(DI)
	MOVNTO X1, 16(DI)
	MOVNTO X2, 32(DI)
	MOVNTO X3, 48(DI)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $64, CX
	JMP  loop

done:
	SFENCE
	RET
