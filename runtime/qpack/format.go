// Package qpack defines how Horizon stores routed-expert weights and the
// prepared artifact that holds them.
//
// Only routed-expert matrices (gate_proj, up_proj, down_proj of each routed
// expert) are quantised. Everything else in a model (attention, norms,
// router, embeddings, lm_head, Qwen's shared expert) is stored FP16. The
// routed matrices are stored in one of two schemes:
//
//   - qpack-int4-b256-v1 (SchemeInt4): 4-bit weights, one FP16 scale per block
//     of 256 consecutive input values. Defined byte for byte below.
//   - fp16 (SchemeFP16): the matrix as row-major little-endian FP16; a
//     baseline that is exact for FP16-representable weights.
//
// # qpack-int4-b256-v1
//
// A matrix W has HF shape [rows = out_features, cols = in_features]. Each row
// is cut into blocks of BlockSize (256) consecutive input values; a row whose
// length is not a multiple of 256 is padded with zeros up to
// ColsPadded = PaddedCols(cols) (Qwen1.5-MoE's down_proj: 1408 -> 1536).
//
// Per block b of row r, with w the 256 values (padding included, padding = 0):
//
//	s32 = max|w| / 7                       (float32 arithmetic)
//	s   = FP16(s32)                        (round to nearest even; a value
//	                                        beyond FP16 saturates to 65504 and
//	                                        is counted)
//	q_i = clamp(round_half_even(w_i / s), -8, 7)   (s as float32; s = 0 => q_i = 0)
//	u_i = q_i + 8                          (stored nibble, 0..15)
//	w'_i = (u_i - 8) * s                   (dequantised value)
//
// An all-zero block has s = 0 and every nibble 8. A non-zero block whose scale
// underflows FP16 to zero is stored the same way (and counted). Because the
// quantiser divides by the FP16-rounded scale, |w_i - w'_i| <= s/2 for every
// value that was not clamped.
//
// Nibble order: byte j of a block (j = 0..127) holds value 2j in its low
// nibble and value 2j+1 in its high nibble:
//
//	byte j:  bit 7      4 3      0
//	        +----------+----------+
//	        | u[2j+1]  |  u[2j]   |
//	        +----------+----------+
//
// A matrix is all packed rows followed by all scales (little-endian FP16):
//
//	offset 0                                   packed rows
//	+------------------------------------------------------------+
//	| row 0: block 0 (128 B) | block 1 (128 B) | ... | block B-1 |  B = ColsPadded/256
//	| row 1: ...                                                 |  ColsPadded/2 bytes a row
//	| ...                                                        |
//	| row R-1                                                    |
//	+------------------------------------------------------------+
//	offset R*ColsPadded/2 (ScalesOffset)       scales
//	+------------------------------------------------------------+
//	| row 0: s[0,0] s[0,1] ... s[0,B-1]   (2 bytes each, LE FP16)|
//	| ...                                                        |
//	| row R-1: s[R-1,0] ... s[R-1,B-1]                           |
//	+------------------------------------------------------------+
//	total Int4MatrixBytes(R, C) = R*ColsPadded/2 + R*B*2
//
// One expert record is gate_proj, up_proj and down_proj back to back, each
// starting at a multiple of 256 bytes inside the record, and the record size
// itself a multiple of 256 (see RecordLayout). Records are stored
// [layer][expert] in experts.bin (see Artifact).
//
// The v1 format is frozen: a different layout (e.g. a kernel-friendly
// interleave) gets a new scheme name.
package qpack

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/horizon-runmap/horizon/runtime/half"
)

// BlockSize is the number of consecutive input values sharing one scale.
const BlockSize = 256

// Scheme names how routed-expert matrices are stored.
type Scheme string

const (
	// SchemeInt4 is qpack-int4-b256-v1 (see the package documentation).
	SchemeInt4 Scheme = "qpack-int4-b256-v1"
	// SchemeFP16 stores routed matrices as row-major little-endian FP16.
	SchemeFP16 Scheme = "fp16"
)

// ErrNonFinite marks a NaN or ±Inf weight; the error names its position.
var ErrNonFinite = errors.New("weight is not finite")

// ParseScheme accepts a scheme name or its CLI short form ("int4", "fp16").
func ParseScheme(s string) (Scheme, error) {
	switch s {
	case string(SchemeInt4), "int4":
		return SchemeInt4, nil
	case string(SchemeFP16), "FP16":
		return SchemeFP16, nil
	}
	return "", fmt.Errorf("unknown expert scheme %q (want int4 = %s, or fp16)", s, SchemeInt4)
}

// Valid reports whether s is a known scheme.
func (s Scheme) Valid() bool { return s == SchemeInt4 || s == SchemeFP16 }

// StoredDType is the per-tensor "stored" field: the scheme name for INT4,
// "FP16" for the FP16 scheme.
func (s Scheme) StoredDType() string {
	if s == SchemeFP16 {
		return "FP16"
	}
	return string(s)
}

// PaddedCols rounds cols up to the next multiple of BlockSize.
func PaddedCols(cols int) int {
	return (cols + BlockSize - 1) / BlockSize * BlockSize
}

// Int4MatrixBytes is the stored size of a [rows, cols] matrix in
// qpack-int4-b256-v1: packed nibbles plus FP16 scales, no alignment.
func Int4MatrixBytes(rows, cols int) int {
	cp := PaddedCols(cols)
	return rows*cp/2 + rows*(cp/BlockSize)*2
}

// QuantStats describes what quantisation did to one or more matrices.
type QuantStats struct {
	// Values counts real (unpadded) weights quantised.
	Values int64 `json:"values"`
	// PaddedValues counts the zero padding values added to reach a multiple
	// of BlockSize per row.
	PaddedValues int64 `json:"padded_values"`
	// ZeroBlocks counts blocks stored with scale 0 because every value was 0.
	ZeroBlocks int64 `json:"zero_blocks"`
	// UnderflowBlocks counts non-zero blocks whose scale rounded to FP16 zero;
	// they are stored (and dequantise) as zero.
	UnderflowBlocks int64 `json:"underflow_blocks"`
	// SaturatedScales counts scales beyond the FP16 range stored as 65504.
	SaturatedScales int64 `json:"saturated_scales"`
	// ClampedValues counts values whose round(w/s) fell outside [-8, 7].
	ClampedValues int64 `json:"clamped_values"`
	// MaxAbsErr is max |w - dequant(w)| over the real values.
	MaxAbsErr float64 `json:"max_abs_err"`
}

// Add accumulates o into q.
func (q *QuantStats) Add(o QuantStats) {
	q.Values += o.Values
	q.PaddedValues += o.PaddedValues
	q.ZeroBlocks += o.ZeroBlocks
	q.UnderflowBlocks += o.UnderflowBlocks
	q.SaturatedScales += o.SaturatedScales
	q.ClampedValues += o.ClampedValues
	q.MaxAbsErr = max(q.MaxAbsErr, o.MaxAbsErr)
}

// blockScale returns the FP16 scale of a block whose largest magnitude is
// maxAbs, and whether the scale saturated.
func blockScale(maxAbs float32) (bits uint16, saturated bool) {
	s32 := float32(maxAbs / 7)
	return half.F32ToF16Sat(s32)
}

// roundMagic is 1.5 * 2^23: adding and subtracting it rounds a float32 of
// magnitude below 2^22 to an integer, half to even (the FPU's default mode).
const roundMagic = 12582912

// quantizeValue returns the nibble of v for a non-zero scale s, its
// dequantised value and whether round(v/s) fell outside [-8, 7].
func quantizeValue(v, s float32) (nibble uint8, deq float32, clamped bool) {
	x := float32(v / s)
	// Bound x first so the rounding trick applies; values beyond [-9, 8]
	// round outside [-8, 7] anyway and are clamped either way.
	if x > 8 {
		x = 8
	} else if x < -9 {
		x = -9
	}
	x = float32(float32(x+roundMagic) - roundMagic)
	if x > 7 {
		x, clamped = 7, true
	} else if x < -8 {
		x, clamped = -8, true
	}
	return uint8(int8(x) + 8), x * s, clamped
}

// QuantizeMatrix encodes the row-major [rows, cols] matrix w into dst in
// qpack-int4-b256-v1. len(dst) must be Int4MatrixBytes(rows, cols). A NaN or
// infinite weight is an error (wrapping ErrNonFinite) naming its row and
// column; dst is then undefined.
func QuantizeMatrix(dst []byte, w []float32, rows, cols int) (QuantStats, error) {
	var st QuantStats
	if rows <= 0 || cols <= 0 {
		return st, fmt.Errorf("qpack: quantize: bad shape [%d, %d]", rows, cols)
	}
	if len(w) != rows*cols {
		return st, fmt.Errorf("qpack: quantize: %d weights for a [%d, %d] matrix", len(w), rows, cols)
	}
	if len(dst) != Int4MatrixBytes(rows, cols) {
		return st, fmt.Errorf("qpack: quantize: dst has %d bytes, want %d for [%d, %d]", len(dst), Int4MatrixBytes(rows, cols), rows, cols)
	}
	cp := PaddedCols(cols)
	rowBytes := cp / 2
	blocks := cp / BlockSize
	scales := dst[rows*rowBytes:]
	st.Values = int64(rows) * int64(cols)
	st.PaddedValues = int64(rows) * int64(cp-cols)
	tbl := half.F16Table()

	var q [BlockSize]uint8
	for r := 0; r < rows; r++ {
		row := w[r*cols : (r+1)*cols]
		for b := 0; b < blocks; b++ {
			c0 := b * BlockSize
			vals := row[c0:min(c0+BlockSize, cols)] // real values; the rest is zero padding
			var maxAbs float32
			for i, v := range vals {
				bits := math.Float32bits(v) &^ (1 << 31)
				if bits >= 0x7f800000 { // exponent all ones: ±Inf or NaN
					return st, fmt.Errorf("qpack: row %d col %d: %w (%v)", r, c0+i, ErrNonFinite, v)
				}
				if a := math.Float32frombits(bits); a > maxAbs {
					maxAbs = a
				}
			}
			sb, sat := blockScale(maxAbs)
			if sat {
				st.SaturatedScales++
			}
			s := tbl[sb]
			switch {
			case maxAbs == 0:
				st.ZeroBlocks++
				for i := range q {
					q[i] = 8
				}
			case s == 0:
				st.UnderflowBlocks++
				for i := range q {
					q[i] = 8
				}
				for _, v := range vals {
					st.MaxAbsErr = max(st.MaxAbsErr, math.Abs(float64(v)))
				}
			default:
				maxErr := st.MaxAbsErr
				for i, v := range vals {
					nib, deq, clamped := quantizeValue(v, s)
					q[i] = nib
					if clamped {
						st.ClampedValues++
					}
					// exact: both are float32; math.Abs and max are branch-free
					maxErr = max(maxErr, math.Abs(float64(deq)-float64(v)))
				}
				st.MaxAbsErr = maxErr
				for i := len(vals); i < BlockSize; i++ {
					q[i] = 8 // padding: q = 0
				}
			}
			out := dst[r*rowBytes+c0/2 : r*rowBytes+c0/2+BlockSize/2]
			for j := range out {
				out[j] = q[2*j] | q[2*j+1]<<4
			}
			binary.LittleEndian.PutUint16(scales[(r*blocks+b)*2:], sb)
		}
	}
	return st, nil
}

// DequantizeMatrix decodes a qpack-int4-b256-v1 [rows, cols] matrix into dst
// (len rows*cols, padding dropped). src must hold Int4MatrixBytes(rows, cols)
// bytes; it panics otherwise.
func DequantizeMatrix(dst []float32, src []byte, rows, cols int) {
	if len(dst) != rows*cols || len(src) < Int4MatrixBytes(rows, cols) {
		panic(fmt.Sprintf("qpack: dequantize [%d, %d]: dst %d values, src %d bytes (want %d, %d)",
			rows, cols, len(dst), len(src), rows*cols, Int4MatrixBytes(rows, cols)))
	}
	cp := PaddedCols(cols)
	rowBytes := cp / 2
	blocks := cp / BlockSize
	scales := src[rows*rowBytes:]
	tbl := half.F16Table()
	for r := 0; r < rows; r++ {
		packed := src[r*rowBytes : (r+1)*rowBytes]
		out := dst[r*cols : (r+1)*cols]
		for c := range out {
			s := tbl[binary.LittleEndian.Uint16(scales[(r*blocks+c/BlockSize)*2:])]
			v := packed[c/2]
			if c&1 == 1 {
				v >>= 4
			}
			out[c] = float32(int(v&15)-8) * s
		}
	}
}

// ScaleBits returns the FP16 bits of the scale of block b of row r of a
// stored qpack-int4-b256-v1 [rows, cols] matrix.
func ScaleBits(src []byte, rows, cols, r, b int) uint16 {
	cp := PaddedCols(cols)
	off := rows*cp/2 + (r*(cp/BlockSize)+b)*2
	return binary.LittleEndian.Uint16(src[off:])
}

// EncodeFP16Matrix writes w as little-endian FP16 (round to nearest even)
// into dst (len 2*len(w)). Finite values beyond the FP16 range saturate to
// ±65504 and are counted. NaN and ±Inf are errors (wrapping ErrNonFinite)
// naming the flat index.
func EncodeFP16Matrix(dst []byte, w []float32) (saturated int64, err error) {
	if len(dst) != 2*len(w) {
		return 0, fmt.Errorf("qpack: encode fp16: dst has %d bytes for %d values", len(dst), len(w))
	}
	for i, v := range w {
		if v != v || math.IsInf(float64(v), 0) {
			return saturated, fmt.Errorf("qpack: index %d: %w (%v)", i, ErrNonFinite, v)
		}
		h, sat := half.F32ToF16Sat(v)
		if sat {
			saturated++
		}
		binary.LittleEndian.PutUint16(dst[2*i:], h)
	}
	return saturated, nil
}

// DecodeFP16Matrix decodes little-endian FP16 src into dst (len(src) must be
// 2*len(dst)).
func DecodeFP16Matrix(dst []float32, src []byte) {
	if len(src) < 2*len(dst) {
		panic(fmt.Sprintf("qpack: decode fp16: %d bytes for %d values", len(src), len(dst)))
	}
	tbl := half.F16Table()
	for i := range dst {
		dst[i] = tbl[binary.LittleEndian.Uint16(src[2*i:])]
	}
}
