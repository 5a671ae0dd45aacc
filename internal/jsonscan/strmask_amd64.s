//go:build amd64 && !purego

#include "textflag.h"

// Nibble tables (VPSHUFB looks up within each 128-bit lane, so each is
// written twice): a byte is of a class when lo[its low nibble] &
// hi[its high nibble] != 0.
//
// The valid escape characters, " \ / b f n r t u: each high nibble that
// holds one (2, 5, 6, 7) owns a bit, set in lo for the low nibbles it
// pairs with: 0x22 " and 0x2F /; 0x5C \; 0x62 b, 0x66 f, 0x6E n; 0x72 r,
// 0x74 t, 0x75 u.
DATA escLo<>+0x00(SB)/8, $0x00040808000d0000
DATA escLo<>+0x08(SB)/8, $0x0104000200000000
DATA escLo<>+0x10(SB)/8, $0x00040808000d0000
DATA escLo<>+0x18(SB)/8, $0x0104000200000000
GLOBL escLo<>(SB), RODATA|NOPTR, $32

DATA escHi<>+0x00(SB)/8, $0x0804020000010000
DATA escHi<>+0x08(SB)/8, $0x0000000000000000
DATA escHi<>+0x10(SB)/8, $0x0804020000010000
DATA escHi<>+0x18(SB)/8, $0x0000000000000000
GLOBL escHi<>(SB), RODATA|NOPTR, $32

// The hex digits: 0x30-0x39 (bit 0, high nibble 3); 0x41-0x46 and
// 0x61-0x66 (bit 1, high nibbles 4 and 6).
DATA hexLo<>+0x00(SB)/8, $0x0103030303030301
DATA hexLo<>+0x08(SB)/8, $0x0000000000000101
DATA hexLo<>+0x10(SB)/8, $0x0103030303030301
DATA hexLo<>+0x18(SB)/8, $0x0000000000000101
GLOBL hexLo<>(SB), RODATA|NOPTR, $32

DATA hexHi<>+0x00(SB)/8, $0x0002000201000000
DATA hexHi<>+0x08(SB)/8, $0x0000000000000000
DATA hexHi<>+0x10(SB)/8, $0x0002000201000000
DATA hexHi<>+0x18(SB)/8, $0x0000000000000000
GLOBL hexHi<>(SB), RODATA|NOPTR, $32

// MASK puts in dst the bits of the bytes of Y0 (low 32) and Y1 (high 32)
// that cmp leaves all ones in Y2 and Y3.
#define MASK(dst) \
	VPMOVMSKB Y2, dst; \
	VPMOVMSKB Y3, DI; \
	SHLQ $32, DI; \
	ORQ DI, dst

// LOOKUP puts in dst the bits of the bytes whose nibbles (low in Y4 and
// Y5, high in Y0 and Y1, for the low and high 32 bytes) are not of the
// class of the tables lo and hi.
#define LOOKUP(lo, hi, dst) \
	VPSHUFB Y4, lo, Y2; \
	VPSHUFB Y0, hi, Y3; \
	VPAND Y3, Y2, Y2; \
	VPCMPEQB Y6, Y2, Y2; \
	VPMOVMSKB Y2, dst; \
	VPSHUFB Y5, lo, Y2; \
	VPSHUFB Y1, hi, Y3; \
	VPAND Y3, Y2, Y2; \
	VPCMPEQB Y6, Y2, Y2; \
	VPMOVMSKB Y2, DI; \
	SHLQ $32, DI; \
	ORQ DI, dst

// SPECIALS puts a quote in every byte of Y8, a backslash in every byte
// of Y9 and 0x1f (the last control character) in every byte of Y10.
#define SPECIALS \
	MOVQ $0x2222222222222222, AX; \
	MOVQ AX, X8; \
	VPBROADCASTQ X8, Y8; \
	MOVQ $0x5c5c5c5c5c5c5c5c, AX; \
	MOVQ AX, X9; \
	VPBROADCASTQ X9, Y9; \
	MOVQ $0x1f1f1f1f1f1f1f1f, AX; \
	MOVQ AX, X10; \
	VPBROADCASTQ X10, Y10

// func scanStringAVX2(p *byte, blocks int, prevEsc, need, seen uint64) (pos int, prevEscOut, needOut, seenOut uint64)
//
// Reads the inside of a JSON string from p, 64 bytes at a time, up to
// blocks blocks (strscan_amd64.go). A block's bytes are turned into masks,
// bit n for byte n: quotes, backslashes, control characters, 'u's, and
// those not a valid escape character or not a hex digit. Its escaped bytes
// are those after the first, third, … backslash of a run (simdjson's
// find_escaped_branchless; prevEsc carries a run's escape into the next
// block); the first unescaped quote closes the string. Before it, a
// control character, an escaped byte that is not a valid escape character,
// or one of the four bytes after an escaped u (need carries them into the
// next block) that is not a hex digit makes the string invalid. seen is
// nonzero once a backslash was read.
//
// pos is the closing quote's offset from p, -1 when the string is invalid,
// -2 when the blocks ran out first (then the Out values carry on).
TEXT ·scanStringAVX2(SB), NOSPLIT, $0-72
	MOVQ p+0(FP), SI
	MOVQ blocks+8(FP), CX
	MOVQ prevEsc+16(FP), DX
	MOVQ need+24(FP), R8
	MOVQ seen+32(FP), R9

	SPECIALS
	MOVQ $0x7575757575757575, AX
	MOVQ AX, X11
	VPBROADCASTQ X11, Y11
	MOVQ $0x0f0f0f0f0f0f0f0f, AX
	MOVQ AX, X12
	VPBROADCASTQ X12, Y12
	VMOVDQU escLo<>(SB), Y13
	VMOVDQU escHi<>(SB), Y14
	VMOVDQU hexLo<>(SB), Y15
	VMOVDQU hexHi<>(SB), Y7
	VPXOR Y6, Y6, Y6

loop:
	VMOVDQU (SI), Y0
	VMOVDQU 32(SI), Y1

	// BX: the backslashes, less one escaped by the previous block.
	VPCMPEQB Y9, Y0, Y2
	VPCMPEQB Y9, Y1, Y3
	MASK(BX)
	MOVQ DX, AX
	NOTQ AX
	ANDQ AX, BX

	// R10: the escaped bytes; DX: whether the next block's first is.
	MOVQ BX, R10
	SHLQ $1, R10
	ORQ DX, R10                  // follows: after a backslash
	MOVQ $0x5555555555555555, R11 // the even bits
	MOVQ R11, AX
	NOTQ AX
	ANDQ BX, AX
	MOVQ R10, DI
	NOTQ DI
	ANDQ DI, AX                  // the odd bits that start a run
	MOVL $0, DX
	ADDQ BX, AX                  // runs from an even bit carried past their end
	ADCQ $0, DX
	SHLQ $1, AX
	XORQ R11, AX
	ANDQ AX, R10

	// AX: the unescaped quotes.
	VPCMPEQB Y8, Y0, Y2
	VPCMPEQB Y8, Y1, Y3
	MASK(AX)
	MOVQ R10, DI
	NOTQ DI
	ANDQ DI, AX

	// R13: what makes the string invalid, starting with control characters.
	VPMINUB Y10, Y0, Y2
	VPCMPEQB Y2, Y0, Y2
	VPMINUB Y10, Y1, Y3
	VPCMPEQB Y3, Y1, Y3
	MASK(R13)

	// R11: the escaped u's.
	VPCMPEQB Y11, Y0, Y2
	VPCMPEQB Y11, Y1, Y3
	MASK(R11)
	ANDQ R10, R11

	// The nibbles: low in Y4, Y5; high in Y0, Y1.
	VPAND Y12, Y0, Y4
	VPAND Y12, Y1, Y5
	VPSRLW $4, Y0, Y0
	VPAND Y12, Y0, Y0
	VPSRLW $4, Y1, Y1
	VPAND Y12, Y1, Y1

	// Escaped bytes that are not valid escape characters.
	LOOKUP(Y13, Y14, R12)
	ANDQ R10, R12
	ORQ R12, R13

	// R12: the four bytes after each escaped u, R8 those of the next
	// block (most blocks have no escaped u and skip this).
	MOVQ R8, R12
	MOVQ $0, R8
	TESTQ R11, R11
	JZ hexed
	MOVQ R11, DI
	SHLQ $1, DI
	ORQ DI, R12
	MOVQ R11, DI
	SHLQ $2, DI
	ORQ DI, R12
	MOVQ R11, DI
	SHLQ $3, DI
	ORQ DI, R12
	MOVQ R11, DI
	SHLQ $4, DI
	ORQ DI, R12
	MOVQ R11, R8
	SHRQ $60, R8
	MOVQ R11, DI
	SHRQ $61, DI
	ORQ DI, R8
	MOVQ R11, DI
	SHRQ $62, DI
	ORQ DI, R8
	SHRQ $63, R11
	ORQ R11, R8

hexed:
	// Bytes after an escaped u that are not hex digits.
	TESTQ R12, R12
	JZ checked
	LOOKUP(Y15, Y7, R11)
	ANDQ R12, R11
	ORQ R11, R13

checked:
	TESTQ AX, AX
	JNZ closing
	TESTQ R13, R13
	JNZ invalid
	ORQ BX, R9
	ADDQ $64, SI
	DECQ CX
	JNZ loop

	MOVQ $-2, pos+40(FP)
	MOVQ DX, prevEscOut+48(FP)
	MOVQ R8, needOut+56(FP)
	MOVQ R9, seenOut+64(FP)
	VZEROUPPER
	RET

closing:
	// DI: the bytes up to the closing quote, which must all be valid.
	MOVQ AX, R11
	NEGQ R11
	ANDQ AX, R11
	LEAQ -1(R11), DI
	ORQ R11, DI
	TESTQ DI, R13
	JNZ invalid
	ANDQ DI, BX
	ORQ BX, R9
	BSFQ AX, AX
	SUBQ p+0(FP), SI
	ADDQ SI, AX
	MOVQ AX, pos+40(FP)
	MOVQ DX, prevEscOut+48(FP)
	MOVQ R8, needOut+56(FP)
	MOVQ R9, seenOut+64(FP)
	VZEROUPPER
	RET

invalid:
	MOVQ $-1, pos+40(FP)
	MOVQ $0, prevEscOut+48(FP)
	MOVQ $0, needOut+56(FP)
	MOVQ $0, seenOut+64(FP)
	VZEROUPPER
	RET

// func specialMask64(p *byte) uint64
//
// The quotes, backslashes and control characters (bytes up to 0x1f) among
// the 64 bytes at p: bit k for p[k] (skipper.go).
TEXT ·specialMask64(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), SI
	SPECIALS
	VMOVDQU (SI), Y0
	VMOVDQU 32(SI), Y1
	VPCMPEQB Y8, Y0, Y2
	VPCMPEQB Y9, Y0, Y3
	VPOR Y3, Y2, Y2
	VPMINUB Y10, Y0, Y3
	VPCMPEQB Y3, Y0, Y3
	VPOR Y3, Y2, Y2
	VPMOVMSKB Y2, AX
	VPCMPEQB Y8, Y1, Y4
	VPCMPEQB Y9, Y1, Y5
	VPOR Y5, Y4, Y4
	VPMINUB Y10, Y1, Y5
	VPCMPEQB Y5, Y1, Y5
	VPOR Y5, Y4, Y4
	VPMOVMSKB Y4, DX
	SHLQ $32, DX
	ORQ DX, AX
	MOVQ AX, ret+8(FP)
	VZEROUPPER
	RET
