package cpu

import (
	"encoding/binary"
	"fmt"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/half"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// ExpertMatVec implements backend.Backend. For qpack-int4-b256-v1 each output
// is Σ_blocks s_b · (Σ_{j<256} q_j · x_j): the inner sum uses four
// interleaved FP32 partial sums (value j to sum j mod 4, combined
// (s0+s1)+(s2+s3)), then the FP16 scale multiplies the block sum, and blocks
// add in order. Padding columns hold q = 0 and are skipped. FP16 records use
// dot's order over the decoded row.
func (b *Backend) ExpertMatVec(dst, rec backend.Tensor, m qpack.MatrixLayout, scheme qpack.Scheme, x backend.Tensor) error {
	d, err := f32s("ExpertMatVec dst", dst)
	if err != nil {
		return err
	}
	r, err := bytesOf("ExpertMatVec rec", rec)
	if err != nil {
		return err
	}
	xs, err := f32s("ExpertMatVec x", x)
	if err != nil {
		return err
	}
	if len(d) != m.Rows || len(xs) != m.Cols || m.Offset < 0 || m.Offset+m.Bytes > len(r) {
		return shapeErr("ExpertMatVec", "dst %d, x %d for a [%d, %d] matrix at [%d, %d) of a %d-byte record",
			len(d), len(xs), m.Rows, m.Cols, m.Offset, m.Offset+m.Bytes, len(r))
	}
	mat := r[m.Offset : m.Offset+m.Bytes]
	switch scheme {
	case qpack.SchemeInt4:
		int4MatVec(d, mat, m, xs, b.workers)
	case qpack.SchemeFP16:
		fp16MatVec(d, mat, m, xs, b.workers)
	default:
		return fmt.Errorf("cpu: ExpertMatVec: unknown scheme %q", scheme)
	}
	return nil
}

func int4MatVec(d []float32, mat []byte, m qpack.MatrixLayout, xs []float32, workers int) {
	rowBytes := m.ColsPadded / 2
	blocks := m.ColsPadded / qpack.BlockSize
	scales := mat[m.ScalesOffset:]
	tbl := half.F16Table()
	parallelRows(m.Rows, m.Rows*m.Cols, workers, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			row := mat[r*rowBytes : (r+1)*rowBytes]
			var acc float32
			for blk := 0; blk < blocks; blk++ {
				s := tbl[binary.LittleEndian.Uint16(scales[(r*blocks+blk)*2:])]
				c0 := blk * qpack.BlockSize
				n := min(qpack.BlockSize, m.Cols-c0) // real (unpadded) values in this block
				bb := row[c0/2 : c0/2+qpack.BlockSize/2]
				xb := xs[c0 : c0+n]
				var bs float32
				if n == qpack.BlockSize {
					bs = int4BlockDot(bb, xb)
				} else {
					bs = int4PartialDot(bb, xb, n)
				}
				acc += s * bs
			}
			d[r] = acc
		}
	})
}

func fp16MatVec(d []float32, mat []byte, m qpack.MatrixLayout, xs []float32, workers int) {
	tbl := half.F16Table()
	cols := m.Cols
	parallelRows(m.Rows, m.Rows*cols, workers, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			row := mat[r*cols*2 : (r+1)*cols*2]
			var s0, s1, s2, s3 float32
			c := 0
			for ; c+4 <= cols; c += 4 {
				w := row[2*c : 2*c+8]
				s0 += tbl[uint16(w[0])|uint16(w[1])<<8] * xs[c]
				s1 += tbl[uint16(w[2])|uint16(w[3])<<8] * xs[c+1]
				s2 += tbl[uint16(w[4])|uint16(w[5])<<8] * xs[c+2]
				s3 += tbl[uint16(w[6])|uint16(w[7])<<8] * xs[c+3]
			}
			acc := (s0 + s1) + (s2 + s3)
			for ; c < cols; c++ {
				acc += tbl[uint16(row[2*c])|uint16(row[2*c+1])<<8] * xs[c]
			}
			d[r] = acc
		}
	})
}

// nibbleLUT[b] holds the signed values (low, high) of packed byte b.
var nibbleLUT = func() (t [256][2]float32) {
	for b := range t {
		t[b] = [2]float32{float32(b&15) - 8, float32(b>>4) - 8}
	}
	return t
}()

// int4BlockDot is Σ_{j<256} q_j·x_j over one full block with four
// interleaved partial sums (value j to sum j mod 4).
func int4BlockDot(bb []byte, xb []float32) float32 {
	b := (*[qpack.BlockSize / 2]byte)(bb)
	x := (*[qpack.BlockSize]float32)(xb)
	var s0, s1, s2, s3 float32
	for i := 0; i < qpack.BlockSize/2; i += 2 {
		p, q := &nibbleLUT[b[i]], &nibbleLUT[b[i+1]]
		j := 2 * i
		s0 += p[0] * x[j]
		s1 += p[1] * x[j+1]
		s2 += q[0] * x[j+2]
		s3 += q[1] * x[j+3]
	}
	return (s0 + s1) + (s2 + s3)
}

// int4PartialDot is int4BlockDot's order over the first n values of a block
// (the last, padded block of a row): groups of four, then the tail in order.
func int4PartialDot(bb []byte, xb []float32, n int) float32 {
	var s0, s1, s2, s3 float32
	j := 0
	for ; j+4 <= n; j += 4 {
		p, q := &nibbleLUT[bb[j/2]], &nibbleLUT[bb[j/2+1]]
		s0 += p[0] * xb[j]
		s1 += p[1] * xb[j+1]
		s2 += q[0] * xb[j+2]
		s3 += q[1] * xb[j+3]
	}
	s := (s0 + s1) + (s2 + s3)
	for ; j < n; j++ {
		s += nibbleLUT[bb[j/2]][j&1] * xb[j]
	}
	return s
}
