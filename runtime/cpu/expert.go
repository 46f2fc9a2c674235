package cpu

import (
	"encoding/binary"
	"fmt"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/half"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// ExpertMatVec implements backend.Backend. For qpack-int4-b256-v1 each output
// is Σ_blocks s_b · (Σ_{j<256} q_j · x_j): the inner sum runs in index order
// in FP32, then the FP16 scale multiplies the block sum, and blocks add in
// order. Padding columns hold q = 0 and are skipped.
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
					j := 0
					for ; j+1 < n; j += 2 {
						v := &nibbleLUT[bb[j/2]]
						bs += v[0] * xb[j]
						bs += v[1] * xb[j+1]
					}
					if j < n { // odd tail: low nibble only
						bs += nibbleLUT[bb[j/2]][0] * xb[j]
					}
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
			var acc float32
			for c := 0; c < cols; c++ {
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

// int4BlockDot is Σ_{j<256} q_j·x_j over one full block, in index order.
func int4BlockDot(bb []byte, xb []float32) float32 {
	bb = bb[:qpack.BlockSize/2]
	xb = xb[:qpack.BlockSize]
	var s float32
	for i, v := range bb {
		p := &nibbleLUT[v]
		s += p[0] * xb[2*i]
		s += p[1] * xb[2*i+1]
	}
	return s
}
