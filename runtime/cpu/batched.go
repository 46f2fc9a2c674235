package cpu

import (
	"encoding/binary"
	"fmt"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/half"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// The batched ops (backend.Batched) read each weight row once for all the
// tokens of a batch and give every token the per-token op's bits: a row's
// values are decoded once (FP32 weights as they are, an FP16 expert row
// through the half table, an INT4 row through the nibble values, all exact),
// and each token's dot product then runs in dot's order, which is the order
// of MatVec, fp16MatVec and, block by block, int4BlockDot and
// int4PartialDot (value j into partial sum j mod 4, the sums added as
// (s0+s1)+(s2+s3), a short tail in order).

var _ backend.Batched = (*Backend)(nil)

// Rows implements backend.Batched.
func (b *Backend) Rows(t backend.Tensor, width, lo, n int) (backend.Tensor, error) {
	v, ok := t.(*vec)
	if !ok || v == nil {
		return nil, fmt.Errorf("cpu: Rows: not a CPU float tensor (%T)", t)
	}
	if v.freed {
		return nil, fmt.Errorf("cpu: Rows: use after free")
	}
	if width <= 0 || lo < 0 || n < 0 || (lo+n)*width > len(v.data) {
		return nil, shapeErr("Rows", "rows [%d, %d) of width %d in %d values", lo, lo+n, width, len(v.data))
	}
	return &vec{data: v.data[lo*width : (lo+n)*width : (lo+n)*width], dt: v.dt}, nil
}

// MatMul implements backend.Batched.
func (b *Backend) MatMul(dst, w, x, bias backend.Tensor, T int) error {
	d, err := f32s("MatMul dst", dst)
	if err != nil {
		return err
	}
	ws, err := f32s("MatMul w", w)
	if err != nil {
		return err
	}
	xs, err := f32s("MatMul x", x)
	if err != nil {
		return err
	}
	if T <= 0 || len(d)%T != 0 || len(xs)%T != 0 {
		return shapeErr("MatMul", "dst %d and x %d values for %d tokens", len(d), len(xs), T)
	}
	rows, cols := len(d)/T, len(xs)/T
	if rows*cols != len(ws) {
		return shapeErr("MatMul", "W has %d values, want [%d, %d]", len(ws), rows, cols)
	}
	var bs []float32
	if bias != nil {
		if bs, err = f32s("MatMul bias", bias); err != nil {
			return err
		}
		if len(bs) != rows {
			return shapeErr("MatMul", "bias has %d values, want %d", len(bs), rows)
		}
	}
	parallelRows(rows, T*rows*cols, b.workers, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			wr := ws[r*cols : (r+1)*cols]
			dots(wr, xs, cols, T, func(t int, s float32) {
				if bs != nil {
					s += bs[r]
				}
				d[t*rows+r] = s
			})
		}
	})
	return nil
}

// dots calls out(t, dot(w, x[t])) for the T rows of x [T, cols], four
// tokens at a time over one pass of w.
func dots(w, x []float32, cols, T int, out func(t int, s float32)) {
	t := 0
	for ; t+4 <= T; t += 4 {
		s := dot4(w, x[t*cols:(t+1)*cols], x[(t+1)*cols:(t+2)*cols], x[(t+2)*cols:(t+3)*cols], x[(t+3)*cols:(t+4)*cols])
		for j := range 4 {
			out(t+j, s[j])
		}
	}
	for ; t < T; t++ {
		out(t, dot(w, x[t*cols:(t+1)*cols]))
	}
}

// dot4 is dot(a, b_j) for four vectors b_j, each in dot's order.
func dot4(a, b0, b1, b2, b3 []float32) [4]float32 {
	n := len(a)
	b0, b1, b2, b3 = b0[:n], b1[:n], b2[:n], b3[:n]
	var p, q, r, s [4]float32 // partial sums 0..3 of each vector
	i := 0
	for ; i+4 <= n; i += 4 {
		a0, a1, a2, a3 := a[i], a[i+1], a[i+2], a[i+3]
		p[0] += a0 * b0[i]
		p[1] += a1 * b0[i+1]
		p[2] += a2 * b0[i+2]
		p[3] += a3 * b0[i+3]
		q[0] += a0 * b1[i]
		q[1] += a1 * b1[i+1]
		q[2] += a2 * b1[i+2]
		q[3] += a3 * b1[i+3]
		r[0] += a0 * b2[i]
		r[1] += a1 * b2[i+1]
		r[2] += a2 * b2[i+2]
		r[3] += a3 * b2[i+3]
		s[0] += a0 * b3[i]
		s[1] += a1 * b3[i+1]
		s[2] += a2 * b3[i+2]
		s[3] += a3 * b3[i+3]
	}
	out := [4]float32{(p[0] + p[1]) + (p[2] + p[3]), (q[0] + q[1]) + (q[2] + q[3]), (r[0] + r[1]) + (r[2] + r[3]), (s[0] + s[1]) + (s[2] + s[3])}
	for ; i < n; i++ {
		out[0] += a[i] * b0[i]
		out[1] += a[i] * b1[i]
		out[2] += a[i] * b2[i]
		out[3] += a[i] * b3[i]
	}
	return out
}

var _ backend.ExpertGroups = (*Backend)(nil)

// ExpertMatMulGroup implements backend.ExpertGroups: one ExpertMatMul per
// expert (the CPU runs them one after the other either way; it is here so
// that the conformance suite checks the engine's grouped call on every
// backend).
func (b *Backend) ExpertMatMulGroup(dst backend.Tensor, dstRows [][]int, recs []backend.Tensor, m qpack.MatrixLayout, scheme qpack.Scheme, x backend.Tensor, xRows [][]int) error {
	if len(dstRows) != len(recs) || len(xRows) != len(recs) {
		return shapeErr("ExpertMatMulGroup", "%d experts, %d destination row lists, %d input row lists", len(recs), len(dstRows), len(xRows))
	}
	for j := range recs {
		if err := b.ExpertMatMul(dst, dstRows[j], recs[j], m, scheme, x, xRows[j]); err != nil {
			return fmt.Errorf("expert %d of %d: %w", j, len(recs), err)
		}
	}
	return nil
}

// ExpertMatMul implements backend.Batched.
func (b *Backend) ExpertMatMul(dst backend.Tensor, dstRows []int, rec backend.Tensor, m qpack.MatrixLayout, scheme qpack.Scheme, x backend.Tensor, xRows []int) error {
	d, err := f32s("ExpertMatMul dst", dst)
	if err != nil {
		return err
	}
	r, err := bytesOf("ExpertMatMul rec", rec)
	if err != nil {
		return err
	}
	xs, err := f32s("ExpertMatMul x", x)
	if err != nil {
		return err
	}
	if m.Offset < 0 || m.Offset+m.Bytes > len(r) || m.Rows <= 0 || m.Cols <= 0 {
		return shapeErr("ExpertMatMul", "a [%d, %d] matrix at [%d, %d) of a %d-byte record", m.Rows, m.Cols, m.Offset, m.Offset+m.Bytes, len(r))
	}
	if len(dstRows) != len(xRows) || len(d)%m.Rows != 0 || len(xs)%m.Cols != 0 {
		return shapeErr("ExpertMatMul", "%d destination rows for %d inputs, dst %d values (rows of %d), x %d (rows of %d)",
			len(dstRows), len(xRows), len(d), m.Rows, len(xs), m.Cols)
	}
	nd, nx := len(d)/m.Rows, len(xs)/m.Cols
	for i := range dstRows {
		if dstRows[i] < 0 || dstRows[i] >= nd || xRows[i] < 0 || xRows[i] >= nx {
			return shapeErr("ExpertMatMul", "pair %d: row %d of %d outputs from row %d of %d inputs", i, dstRows[i], nd, xRows[i], nx)
		}
	}
	if scheme != qpack.SchemeInt4 && scheme != qpack.SchemeFP16 {
		return fmt.Errorf("cpu: ExpertMatMul: unknown scheme %q", scheme)
	}
	// Gather the inputs into [n, Cols], so that dots reads them in a run.
	n, cols := len(xRows), m.Cols
	xg := make([]float32, n*cols)
	for i, xr := range xRows {
		copy(xg[i*cols:(i+1)*cols], xs[xr*cols:(xr+1)*cols])
		if b.expertAct16 && scheme == qpack.SchemeInt4 {
			half.RowShiftF16(xg[i*cols : (i+1)*cols])
		}
	}
	mat := r[m.Offset : m.Offset+m.Bytes]
	tbl := half.F16Table()
	parallelRows(m.Rows, n*m.Rows*cols, b.workers, func(lo, hi int) {
		w := make([]float32, cols) // one row's values
		for row := lo; row < hi; row++ {
			put := func(i int, s float32) { d[dstRows[i]*m.Rows+row] = s }
			if scheme == qpack.SchemeFP16 {
				src := mat[row*cols*2 : (row+1)*cols*2]
				for c := range w {
					w[c] = tbl[uint16(src[2*c])|uint16(src[2*c+1])<<8]
				}
				dots(w, xg, cols, n, put)
				continue
			}
			int4Dots(w, mat, m, row, xg, n, put)
		}
	})
	return nil
}

// int4Dots calls out(i, ·) with int4MatVec's value of row row for the n
// gathered inputs xg [n, Cols]: per block, the scale times the block's dot
// (int4BlockDot's order for a full block, int4PartialDot's for the padded
// last one), summed over the blocks in order; four inputs at a time over
// one pass of each block. w is scratch of Cols values.
func int4Dots(w []float32, mat []byte, m qpack.MatrixLayout, row int, xg []float32, n int, out func(i int, s float32)) {
	rowBytes := m.ColsPadded / 2
	blocks := m.ColsPadded / qpack.BlockSize
	src := mat[row*rowBytes : (row+1)*rowBytes]
	for c := 0; c < m.Cols; c += 2 {
		v := &nibbleLUT[src[c/2]]
		w[c] = v[0]
		if c+1 < m.Cols {
			w[c+1] = v[1]
		}
	}
	tbl := half.F16Table()
	scales := mat[m.ScalesOffset:]
	cols := m.Cols
	scale := func(blk int) float32 { return tbl[binary.LittleEndian.Uint16(scales[(row*blocks+blk)*2:])] }
	i := 0
	for ; i+4 <= n; i += 4 {
		x0, x1, x2, x3 := xg[i*cols:(i+1)*cols], xg[(i+1)*cols:(i+2)*cols], xg[(i+2)*cols:(i+3)*cols], xg[(i+3)*cols:(i+4)*cols]
		var acc [4]float32
		for blk := 0; blk < blocks; blk++ {
			s := scale(blk)
			c0 := blk * qpack.BlockSize
			e := min(c0+qpack.BlockSize, cols)
			d := dot4(w[c0:e], x0[c0:e], x1[c0:e], x2[c0:e], x3[c0:e])
			for j := range 4 {
				acc[j] += s * d[j]
			}
		}
		for j := range 4 {
			out(i+j, acc[j])
		}
	}
	for ; i < n; i++ {
		xi := xg[i*cols : (i+1)*cols]
		var acc float32
		for blk := 0; blk < blocks; blk++ {
			s := scale(blk)
			c0 := blk * qpack.BlockSize
			e := min(c0+qpack.BlockSize, cols)
			acc += s * dot(w[c0:e], xi[c0:e])
		}
		out(i, acc)
	}
}
