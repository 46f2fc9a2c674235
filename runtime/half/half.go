// Package half converts between float32 and the two 16-bit float formats the
// runtime meets: IEEE binary16 (FP16, what we store and compute with) and
// bfloat16 (BF16, what Hugging Face checkpoints ship).
//
// FP16 conversion is delegated to github.com/x448/float16, whose float32 ->
// FP16 path rounds to nearest even; this package adds a 64K-entry decode table
// because the CPU backend decodes FP16 in its innermost loops.
//
// BF16 is the top half of an IEEE float32, so its conversions are a shift; the
// float32 -> BF16 direction rounds to nearest even (NaN stays NaN).
package half

import (
	"math"

	"github.com/x448/float16"
)

// f16Table maps every FP16 bit pattern to its float32 value.
var f16Table = func() *[65536]float32 {
	var t [65536]float32
	for i := range t {
		t[i] = float16.Frombits(uint16(i)).Float32()
	}
	return &t
}()

// F16ToF32 decodes one FP16 value.
func F16ToF32(h uint16) float32 { return f16Table[h] }

// F16Table exposes the decode table for hot loops that index it directly.
func F16Table() *[65536]float32 { return f16Table }

// F32ToF16 encodes f as FP16 with round-to-nearest-even. Values beyond the
// FP16 range become ±Inf; callers that must saturate use F32ToF16Sat.
func F32ToF16(f float32) uint16 { return float16.Fromfloat32(f).Bits() }

// MaxF16 is the largest finite FP16 value.
const MaxF16 = 65504.0

// F32ToF16Sat encodes f as FP16 with round-to-nearest-even, clamping values
// beyond the finite FP16 range to ±65504. It reports whether it clamped.
// NaN is passed through as NaN (callers reject NaN before converting).
func F32ToF16Sat(f float32) (h uint16, saturated bool) {
	h = float16.Fromfloat32(f).Bits()
	if h&0x7fff == 0x7c00 && !math.IsInf(float64(f), 0) || math.IsInf(float64(f), 0) {
		if f > 0 {
			return 0x7bff, true
		}
		return 0xfbff, true
	}
	return h, false
}

// BF16ToF32 decodes one bfloat16 value exactly.
func BF16ToF32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// F32ToBF16 encodes f as bfloat16 with round-to-nearest-even.
func F32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 { // NaN: keep it a quiet NaN
		return uint16(u>>16) | 0x40
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// RowShiftF16 rounds a row of activations to FP16 at one power-of-two
// shift for the whole row, in place: with E the biased exponent of the
// row's largest magnitude, s = 141 - E (126 when E < 15, a tiny or zero
// row), and each value becomes fp16(x·2^s)·2^-s, rounded to nearest even.
// The largest magnitude then lands in [2^14, 2^15), so a value keeps 11
// significant bits; one about 2^28 below the row's largest keeps fewer (an
// FP16 subnormal), and one about 2^39 below it becomes zero. It returns s. This is the numerics of the CUDA
// backend's row-shift FP16 pre-split (kernels/matmul_tc.cu
// tc_split_rows_a16r), which the declared FP16 expert activations run
// (engine.LoadOptions.ExpertActivations); the CPU backend applies it to
// the same rows as its reference.
func RowShiftF16(row []float32) int {
	var mx float32
	for _, v := range row {
		mx = max(mx, float32(math.Abs(float64(v))))
	}
	e := int(math.Float32bits(mx)>>23) & 0xff
	s := 126
	if e >= 15 {
		s = 141 - e
	}
	up := math.Float32frombits(uint32(127+s) << 23)
	down := math.Float32frombits(uint32(127-s) << 23)
	for i, v := range row {
		row[i] = F16ToF32(F32ToF16(v*up)) * down
	}
	return s
}

// ChunkF16 is the width of the chunks ChunkShiftF16 rounds at one shift
// each: the tensor cores' K step of 32 activations (kernels/tc.cuh TC_BK).
const ChunkF16 = 32

// ChunkShiftF16 rounds a row of activations to FP16 at one power-of-two
// shift per ChunkF16-value chunk, in place: each chunk (the last may be
// shorter) is rounded as RowShiftF16 rounds a row, its shift from its own
// largest magnitude. This is the numerics of the tensor cores' FP16 split
// of an activation chunk (kernels/tc.cuh tc_split8) with the low half
// dropped, which the declared FP16 dense activations run
// (engine.LoadOptions.DenseActivations); the CPU backend applies it to the
// same rows as its reference.
func ChunkShiftF16(row []float32) {
	for lo := 0; lo < len(row); lo += ChunkF16 {
		RowShiftF16(row[lo:min(lo+ChunkF16, len(row))])
	}
}
