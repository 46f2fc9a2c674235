package cpu

import (
	"fmt"

	"github.com/horizon-runmap/horizon/runtime/backend"
)

// The row ops (backend.RowOps) on the CPU are the per-token ops over the
// batch's rows in order, through Rows views: the same bits by construction.
// They let the engine's row-op path and the conformance suite's checks of it
// run without a GPU.

var _ backend.RowOps = (*Backend)(nil)

// EmbedRows implements backend.RowOps.
func (b *Backend) EmbedRows(dst, table backend.Tensor, toks []int) error {
	T := len(toks)
	if T == 0 || dst.Len()%T != 0 {
		return shapeErr("EmbedRows", "dst has %d values for %d rows", dst.Len(), T)
	}
	D := dst.Len() / T
	return b.eachRow(T, func(t int) error {
		dt, err := b.Rows(dst, D, t, 1)
		if err != nil {
			return err
		}
		return b.Embed(dt, table, toks[t])
	})
}

// RoPERows implements backend.RowOps.
func (b *Backend) RoPERows(x backend.Tensor, T, nHeads, headDim, pos0 int, theta float64) error {
	return b.eachRow(T, func(t int) error {
		xt, err := b.Rows(x, nHeads*headDim, t, 1)
		if err != nil {
			return err
		}
		return b.RoPE(xt, nHeads, headDim, pos0+t, theta)
	})
}

var _ backend.AttnInRows = (*Backend)(nil)

// SetAttnInRows turns the engine's use of QKRoPEKVRows on or off (off by
// default: the CPU's is the separate ops in order, the reference the engine's
// tests compare the fused path with).
func (b *Backend) SetAttnInRows(on bool) { b.attnIn = on }

// FusesAttnIn implements backend.AttnInRows.
func (b *Backend) FusesAttnIn() bool { return b.attnIn }

// QKRoPEKVRows implements backend.AttnInRows: RMSNorm (q into qo, k in
// place), RoPERows of qo and k, KVAppendRows.
func (b *Backend) QKRoPEKVRows(qo, q, k, v, kCache, vCache, qNorm, kNorm backend.Tensor, T, pos0, nHeads, nKVHeads, headDim int, theta float64, eps float32) error {
	if (qNorm == nil) != (kNorm == nil) {
		return fmt.Errorf("cpu: QKRoPEKVRows: a q norm without a k norm or the reverse")
	}
	if qNorm != nil {
		if qNorm.Len()%headDim != 0 || kNorm.Len()%headDim != 0 {
			return shapeErr("QKRoPEKVRows", "norms of %d and %d values for heads of %d", qNorm.Len(), kNorm.Len(), headDim)
		}
	}
	return backend.QKRoPEKVRowsOps(b, b, qo, q, k, v, kCache, vCache, qNorm, kNorm, T, pos0, nHeads, nKVHeads, headDim, theta, eps)
}

// KVAppendRows implements backend.RowOps.
func (b *Backend) KVAppendRows(kCache, vCache, k, v backend.Tensor, T, pos0 int) error {
	if T <= 0 || k.Len()%T != 0 {
		return shapeErr("KVAppendRows", "k has %d values for %d rows", k.Len(), T)
	}
	n := k.Len() / T
	return b.eachRow(T, func(t int) error {
		kt, err := b.Rows(k, n, t, 1)
		if err != nil {
			return err
		}
		vt, err := b.Rows(v, n, t, 1)
		if err != nil {
			return err
		}
		return b.KVAppend(kCache, vCache, kt, vt, pos0+t)
	})
}

// AttentionRows implements backend.RowOps.
func (b *Backend) AttentionRows(dst, q, kCache, vCache backend.Tensor, T, pos0, nHeads, nKVHeads, headDim int) error {
	Q := nHeads * headDim
	return b.eachRow(T, func(t int) error {
		dt, err := b.Rows(dst, Q, t, 1)
		if err != nil {
			return err
		}
		qt, err := b.Rows(q, Q, t, 1)
		if err != nil {
			return err
		}
		return b.Attention(dt, qt, kCache, vCache, pos0+t+1, nHeads, nKVHeads, headDim)
	})
}

// TopKRows implements backend.RowOps.
func (b *Backend) TopKRows(logits backend.Tensor, T, k int, norm bool) ([]int, []float32, error) {
	if T <= 0 || logits.Len()%T != 0 {
		return nil, nil, shapeErr("TopKRows", "%d logits for %d rows", logits.Len(), T)
	}
	E := logits.Len() / T
	ids, ws := make([]int, 0, T*k), make([]float32, 0, T*k)
	err := b.eachRow(T, func(t int) error {
		lt, err := b.Rows(logits, E, t, 1)
		if err != nil {
			return err
		}
		i, w, err := b.TopK(lt, k, norm)
		ids, ws = append(ids, i...), append(ws, w...)
		return err
	})
	return ids, ws, err
}

// eachRow runs f for rows 0..T-1 in order.
func (b *Backend) eachRow(T int, f func(t int) error) error {
	if T <= 0 {
		return shapeErr("rows", "%d rows", T)
	}
	for t := range T {
		if err := f(t); err != nil {
			return fmt.Errorf("row %d: %w", t, err)
		}
	}
	return nil
}

// CombineRows implements backend.RowOps: per row, a clear and k AddScaled.
func (b *Backend) CombineRows(dst, src backend.Tensor, weights []float32, T, k int) error {
	if T <= 0 || k <= 0 || dst.Len()%T != 0 || src.Len() != dst.Len()*k || len(weights) != T*k {
		return shapeErr("CombineRows", "dst %d values, src %d, %d weights for %d rows of %d sources", dst.Len(), src.Len(), len(weights), T, k)
	}
	n := dst.Len() / T
	zeros := make([]float32, n)
	return b.eachRow(T, func(t int) error {
		dt, err := b.Rows(dst, n, t, 1)
		if err != nil {
			return err
		}
		if err := b.WriteF32(dt, zeros); err != nil {
			return err
		}
		for j := range k {
			st, err := b.Rows(src, n, t*k+j, 1)
			if err != nil {
				return err
			}
			if err := b.AddScaled(dt, st, weights[t*k+j]); err != nil {
				return err
			}
		}
		return nil
	})
}

// AddGatedRows implements backend.RowOps: AddGated row by row.
func (b *Backend) AddGatedRows(dst, x, g backend.Tensor, T int) error {
	if T <= 0 || dst.Len()%T != 0 || x.Len() != dst.Len() || g.Len() != T {
		return shapeErr("AddGatedRows", "dst %d values, x %d, %d gates for %d rows", dst.Len(), x.Len(), g.Len(), T)
	}
	n := dst.Len() / T
	return b.eachRow(T, func(t int) error {
		dt, err := b.Rows(dst, n, t, 1)
		if err != nil {
			return err
		}
		xt, err := b.Rows(x, n, t, 1)
		if err != nil {
			return err
		}
		gt, err := b.Rows(g, 1, t, 1)
		if err != nil {
			return err
		}
		return b.AddGated(dt, xt, gt)
	})
}
