//go:build cuda

package cuda

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/horizon-runmap/horizon/runtime/backend"
)

// The row ops (backend.RowOps) of a batched prefill: RoPE, the KV append,
// attention and top-k over the batch's T rows in one launch (or copy) each
// instead of T, kernels/prefill_rows.cu, every row the per-token kernel's
// bits. Top-k reads the T rows' ids back once.

var _ backend.RowOps = (*Backend)(nil)

// The tiled prefill attention (kernels/prefill_attention.cu): 16 or 32
// query rows a block (QT) of PA_WARPS*32 threads, heads of at most PA_HD
// dims.
const (
	attTiledThreads = 256
	attTiledHDMax   = 128
)

// attTiledSmem is prefill_attention.cu's PA_SMEM(qt): a block's staged
// queries (qt x PA_HD), a tile's keys (PA_PT x PA_LDK) and values (PA_PT x
// PA_HD), FP32; 41,152 bytes for 16 queries, 49,664 for 32 (over the 48
// KiB a launch gets without opting in).
func attTiledSmem(qt int) int {
	return (qt*attTiledHDMax + 32*(attTiledHDMax+4) + 32*attTiledHDMax) * 4
}

// The tensor-core prefill attention (attention_tc_rows_kv16): PAT_BM = 64
// query rows a block of 128 threads; attTCSmem is its PAT_SMEM: the
// queries' hi and lo halves and a tile's K rows (64 x 136 halves each) and
// V transposed (128 x 72 halves).
const (
	attTCRows    = 64
	attTCThreads = 128
	attTCSmem    = (2*attTCRows*(attTiledHDMax+8) + 64*(attTiledHDMax+8) + attTiledHDMax*(64+8)) * 2
)

// attnTC is the kernel-choice predicate of the tensor-core prefill
// attention: where the tiled kernel would run, over an FP16 cache, for heads
// of a multiple of 16 dims, unless tuning.noAttTC. Other bits than the tiled
// kernel's, within the same tolerance of the per-token kernel
// (TestAttentionTiled). The default since session 35: on an H100 it took a
// 512-token OLMoE-1B-7B-shape prefill from 25.0k to 26.7-26.8k prompt tok/s
// and 1,024 tokens from 23.8k to 26.3k (results/prefill-s35). It depends on
// the head and the cache's dtype alone.
func (b *Backend) attnTC(headDim int, kv backend.DType) bool {
	return !b.tune.noAttTC && b.attnTiled(headDim) && kv == backend.F16 && headDim%16 == 0
}

// attTiledRows is the kernel-choice predicate of the tiled attention's
// block: 32 queries (attention_tiled32_rows_f32, each K and V value read
// from shared memory serving 4 queries of a warp) under tuning.attTiled32,
// else 16. Both give a row the same bits: its arithmetic is fixed by its
// position alone.
func (b *Backend) attTiledRows() int {
	if b.tune.attTiled32 {
		return 32
	}
	return 16
}

// attnTiled is the kernel-choice predicate of AttentionRows: the tiled
// kernel, which reads each K and V row once for 16 or 32 queries of a head
// (attTiledRows)
// (the per-token kernel reads the whole prefix again for every row: at 512
// prompt tokens it took 38% of an OLMoE-1B-7B-shape prefill,
// results/prefill-h200-s17), unless tuning.noMatmulTC asks for the
// per-token bits or the head is wider than the kernel's tile. It depends on
// nothing a capacity, wave or step mode changes, and a row's results on its
// position alone.
func (b *Backend) attnTiled(headDim int) bool {
	return !b.tune.noMatmulTC && headDim <= attTiledHDMax && headDim%4 == 0
}

// attRowsMax is the most query rows one attention_rows_f32 launch takes
// (its partials are rows x heads x attSplit x (hd+2) floats).
const attRowsMax = 64

// EmbedRows implements backend.RowOps: one launch of embed_rows over the
// batch's rows, the token ids uploaded in stream order (indexUpload).
func (b *Backend) EmbedRows(dst, table backend.Tensor, toks []int) error {
	d, err := b.tensorOf("EmbedRows", "dst", dst, backend.F32)
	if err != nil {
		return err
	}
	t, err := b.tensorOf("EmbedRows", "table", table, backend.F16, backend.F32)
	if err != nil {
		return err
	}
	T := len(toks)
	if T == 0 || d.n%T != 0 {
		return shapeErr("EmbedRows", "dst of %d values for %d rows", d.n, T)
	}
	D := d.n / T
	if t.n%D != 0 {
		return shapeErr("EmbedRows", "table of %d values is not [V, %d]", t.n, D)
	}
	buf := make([]byte, 4*T)
	for i, tok := range toks {
		if tok < 0 || tok >= t.n/D {
			return fmt.Errorf("cuda: EmbedRows: row %d: token %d outside vocabulary of %d", i, tok, t.n/D)
		}
		binary.LittleEndian.PutUint32(buf[4*i:], uint32(tok))
	}
	kind := 1
	if t.dt == backend.F32 {
		kind = 2
	}
	return b.o.async(func() error {
		ids, err := b.indexUpload(buf)
		if err != nil {
			return fmt.Errorf("cuda: EmbedRows: %w", err)
		}
		return b.launch(b.k.embedRows, b.elementwiseGrid(d.n), block, 0, argPtr(d.ptr), argPtr(t.ptr), argInt(kind), argPtr(ids), argInt(T), argInt(D))
	})
}

// RoPERows implements backend.RowOps.
func (b *Backend) RoPERows(x backend.Tensor, T, nHeads, headDim, pos0 int, theta float64) error {
	xt, err := b.tensorOf("RoPERows", "x", x, backend.F32)
	if err != nil {
		return err
	}
	if T <= 0 || nHeads <= 0 || headDim%2 != 0 || T*nHeads*headDim != xt.n {
		return shapeErr("RoPERows", "x has %d values, want %d rows of %d heads x %d", xt.n, T, nHeads, headDim)
	}
	if pos0 < 0 {
		return fmt.Errorf("cuda: RoPERows: negative position %d", pos0)
	}
	return b.launchAsync("RoPERows", b.k.ropeRows, b.elementwiseGrid(xt.n/2), block, 0,
		argPtr(xt.ptr), argInt(T), argInt(nHeads), argInt(headDim), argInt(pos0), argF64(theta))
}

// KVAppendRows implements backend.RowOps: the T rows are contiguous in k
// and v and land contiguously at positions pos0.., so it is two copies
// (FP32 caches) or one kv_append_f16 launch (FP16).
func (b *Backend) KVAppendRows(kCache, vCache, k, v backend.Tensor, T, pos0 int) error {
	kc, vc, err := b.kvCaches("KVAppendRows", kCache, vCache)
	if err != nil {
		return err
	}
	kt, err := b.tensorOf("KVAppendRows", "k", k, backend.F32)
	if err != nil {
		return err
	}
	vt, err := b.tensorOf("KVAppendRows", "v", v, backend.F32)
	if err != nil {
		return err
	}
	if T <= 0 || kt.n%T != 0 || vt.n != kt.n || kc.n != vc.n || kt.n == 0 || pos0 < 0 || (pos0+T)*(kt.n/T) > kc.n {
		return shapeErr("KVAppendRows", "%d rows of %d values at position %d of a cache of %d values", T, kt.n/max(T, 1), pos0, kc.n)
	}
	n := kt.n / T
	return b.o.async(func() error { return b.appendKV("KVAppendRows", kc, vc, kt.ptr, vt.ptr, T*n, pos0*n) })
}

// AttentionRows implements backend.RowOps: by default (attnTiled)
// attention_tiled_rows_f32 (kernels/prefill_attention.cu, or its _kv16 twin
// over FP16 caches) in one launch; under tuning.noMatmulTC, or for heads
// wider than it takes, attention_rows_f32 (or attention_rows_f32_kv16), the
// per-token kernel's bits, over at most attRowsMax rows a launch.
func (b *Backend) AttentionRows(dst, q, kCache, vCache backend.Tensor, T, pos0, nHeads, nKVHeads, headDim int) error {
	d, err := b.tensorOf("AttentionRows", "dst", dst, backend.F32)
	if err != nil {
		return err
	}
	qt, err := b.tensorOf("AttentionRows", "q", q, backend.F32)
	if err != nil {
		return err
	}
	kc, vc, err := b.kvCaches("AttentionRows", kCache, vCache)
	if err != nil {
		return err
	}
	Q, kvDim := nHeads*headDim, nKVHeads*headDim
	if T <= 0 || qt.n != T*Q || d.n != qt.n || nKVHeads <= 0 || nHeads%nKVHeads != 0 || pos0 < 0 || (pos0+T)*kvDim > kc.n || vc.n != kc.n {
		return shapeErr("AttentionRows", "q %d, dst %d for %d rows of %d heads / %d kv heads x %d from position %d, a %d-value cache",
			qt.n, d.n, T, nHeads, nKVHeads, headDim, pos0, kc.n)
	}
	if err := attentionHeadDimOK(headDim); err != nil {
		return fmt.Errorf("cuda: AttentionRows: %w", err)
	}
	if (qt.ptr|kc.ptr|vc.ptr|d.ptr)%16 != 0 {
		return fmt.Errorf("cuda: AttentionRows: q, dst, K and V must start on 16-byte boundaries (the kernel loads float4s)")
	}
	return b.o.async(func() error {
		if b.attnTC(headDim, kc.dt) {
			return b.launch(b.k.attentionTC, nHeads*((T+attTCRows-1)/attTCRows), attTCThreads, attTCSmem,
				argPtr(d.ptr), argPtr(qt.ptr), argPtr(kc.ptr), argPtr(vc.ptr), argInt(T), argInt(pos0), argInt(nHeads),
				argInt(nKVHeads), argInt(headDim))
		}
		if b.attnTiled(headDim) {
			fn, rows := b.k.kv[kvIndex(kc.dt)].attentionTiled, b.attTiledRows()
			if rows == 32 {
				fn = b.k.kv[kvIndex(kc.dt)].attentionTiled32
			}
			return b.launch(fn, nHeads*((T+rows-1)/rows), attTiledThreads, attTiledSmem(rows),
				argPtr(d.ptr), argPtr(qt.ptr), argPtr(kc.ptr), argPtr(vc.ptr), argInt(T), argInt(pos0), argInt(nHeads),
				argInt(nKVHeads), argInt(headDim))
		}
		rows := min(T, attRowsMax)
		if err := b.scratch(&b.attRowsPart, rows*attPartFloats(nHeads, headDim)); err != nil {
			return fmt.Errorf("cuda: AttentionRows: scratch: %w", err)
		}
		if err := b.scratch(&b.attRowsCnt, rows*nHeads); err != nil {
			return fmt.Errorf("cuda: AttentionRows: tickets: %w", err)
		}
		for t0 := 0; t0 < T; t0 += rows {
			n := min(rows, T-t0)
			at := cu.DevicePtr(4 * t0 * Q)
			if err := b.launch(b.k.kv[kvIndex(kc.dt)].attentionRows, n*nHeads*attSplit, block, 0, argPtr(d.ptr+at), argPtr(b.attRowsPart.ptr),
				argPtr(b.attRowsCnt.ptr), argPtr(qt.ptr+at), argPtr(kc.ptr), argPtr(vc.ptr), argInt(pos0+t0), argInt(nHeads),
				argInt(nKVHeads), argInt(headDim)); err != nil {
				return fmt.Errorf("cuda: AttentionRows: rows %d..%d: %w", t0, t0+n-1, err)
			}
		}
		return nil
	})
}

// topKRowsWarp is the kernel-choice predicate of router_topk_rows_warp (a
// warp a row, route_step's selection: the same ids and weights as the
// block-wide router_topk_rows, which takes k rounds of two block barriers
// each): E <= topKWarpMaxExperts and k <= topKWarpMaxK, unless
// tuning.noTopKWarp. It depends on E and k alone, so every batched
// prefill of a model (device routing or read back, any capacity) takes the
// same kernel.
func (b *Backend) topKRowsWarp(E, k int) bool {
	return !b.tune.noTopKWarp && E <= topKWarpMaxExperts && k <= topKWarpMaxK
}

const (
	// topKWarpMaxExperts and topKWarpMaxK are router_topk_rows_warp's
	// bounds (32 * ROUTE_MAX_PER_LANE logits, 64 winners a row).
	topKWarpMaxExperts, topKWarpMaxK = 256, 64
	// topKWarpSmem is its dynamic shared memory (TOPK_WARP_SMEM).
	topKWarpSmem = 8 * (topKWarpMaxExperts + 2*topKWarpMaxK) * 4
)

// topKRowsLaunch launches the T rows' top-k of logits [T][E] into ids and
// w [T][k]: router_topk_rows_warp where topKRowsWarp picks it, else
// router_topk_rows (a block a row, dynamic shared memory E floats + E
// bytes); owner thread only.
func (b *Backend) topKRowsLaunch(logits cu.DevicePtr, T, E, k int, ids, w cu.DevicePtr) error {
	if b.topKRowsWarp(E, k) {
		return b.launch(b.k.topkRowsWarp, (T+7)/8, block, topKWarpSmem, argPtr(logits), argInt(T), argInt(E), argInt(k), argPtr(ids), argPtr(w))
	}
	return b.launch(b.k.topkRows, T, block, E*4+(E+3)/4*4, argPtr(logits), argInt(E), argInt(k), argPtr(ids), argPtr(w))
}

// TopKRows implements backend.RowOps: topKRowsLaunch, one read back of
// the T rows' ids and weights, then TopK's renormalisation on the host.
func (b *Backend) TopKRows(logits backend.Tensor, T, k int, norm bool) ([]int, []float32, error) {
	lt, err := b.tensorOf("TopKRows", "logits", logits, backend.F32)
	if err != nil {
		return nil, nil, err
	}
	if T <= 0 || lt.n%T != 0 {
		return nil, nil, shapeErr("TopKRows", "%d logits for %d rows", lt.n, T)
	}
	E := lt.n / T
	if k <= 0 || k > E {
		return nil, nil, shapeErr("TopKRows", "k %d over %d logits a row", k, E)
	}
	if k > maxGroup {
		return nil, nil, fmt.Errorf("cuda: TopKRows: k %d above %d", k, maxGroup)
	}
	smem := E*4 + (E+3)/4*4
	if smem > b.smemMax {
		return nil, nil, fmt.Errorf("cuda: TopKRows: %d logits a row exceed shared memory", E)
	}
	ids := make([]int, T*k)
	ws := make([]float32, T*k)
	err = b.o.do(func() error {
		if err := b.scratch(&b.topkRows, 2*T*k); err != nil {
			return err
		}
		idp, wp := b.topkRows.ptr, b.topkRows.ptr+cu.DevicePtr(4*T*k)
		if err := b.topKRowsLaunch(lt.ptr, T, E, k, idp, wp); err != nil {
			return err
		}
		host, err := b.read(idp, 8*T*k)
		if err != nil {
			return err
		}
		id32 := unsafe.Slice((*int32)(unsafe.Pointer(&host[0])), T*k)
		w32 := unsafe.Slice((*float32)(unsafe.Pointer(&host[4*T*k])), T*k)
		for i := range T * k {
			ids[i], ws[i] = int(id32[i]), w32[i]
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("cuda: TopKRows: %w", err)
	}
	if norm {
		for t := range T {
			renormalise(ws[t*k : (t+1)*k])
		}
	}
	return ids, ws, nil
}

// CombineRows implements backend.RowOps: the T x k weights uploaded (in
// compute-stream order, after every earlier launch that read them), then one
// combine_rows_f32 launch: per element the clear and the k add_scaled_f32 of
// the per-token ops, in order.
func (b *Backend) CombineRows(dst, src backend.Tensor, weights []float32, T, k int) error {
	d, err := b.tensorOf("CombineRows", "dst", dst, backend.F32)
	if err != nil {
		return err
	}
	st, err := b.tensorOf("CombineRows", "src", src, backend.F32)
	if err != nil {
		return err
	}
	if T <= 0 || k <= 0 || d.n%T != 0 || st.n != d.n*k || len(weights) != T*k {
		return shapeErr("CombineRows", "dst %d values, src %d, %d weights for %d rows of %d sources", d.n, st.n, len(weights), T, k)
	}
	n := d.n / T
	wb := append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(&weights[0])), 4*len(weights))...)
	return b.o.async(func() error {
		if err := b.scratch(&b.combW, T*k); err != nil {
			return fmt.Errorf("cuda: CombineRows: scratch: %w", err)
		}
		up := func() error { return b.copyIn(b.combW.ptr, unsafe.Pointer(&wb[0]), len(wb)) }
		if len(wb) <= b.ring.slotBytes {
			up = func() error { return b.ring.upload(b.compute, b.combW.ptr, wb) }
		}
		if err := up(); err != nil {
			return fmt.Errorf("cuda: CombineRows: upload the weights: %w", err)
		}
		if err := b.launch(b.k.combineRows, b.elementwiseGrid(T*n), block, 0, argPtr(d.ptr), argPtr(st.ptr), argPtr(b.combW.ptr),
			argInt(T), argInt(k), argInt(n)); err != nil {
			return fmt.Errorf("cuda: CombineRows: launch: %w", err)
		}
		return nil
	})
}

// AddGatedRows implements backend.RowOps: one add_gated_rows_f32 launch.
func (b *Backend) AddGatedRows(dst, x, g backend.Tensor, T int) error {
	d, err := b.tensorOf("AddGatedRows", "dst", dst, backend.F32)
	if err != nil {
		return err
	}
	xt, err := b.tensorOf("AddGatedRows", "x", x, backend.F32)
	if err != nil {
		return err
	}
	gt, err := b.tensorOf("AddGatedRows", "g", g, backend.F32)
	if err != nil {
		return err
	}
	if T <= 0 || d.n%T != 0 || xt.n != d.n || gt.n != T {
		return shapeErr("AddGatedRows", "dst %d values, x %d, %d gates for %d rows", d.n, xt.n, gt.n, T)
	}
	return b.launchAsync("AddGatedRows", b.k.addGatedRows, b.elementwiseGrid(d.n), block, 0,
		argPtr(d.ptr), argPtr(xt.ptr), argPtr(gt.ptr), argInt(T), argInt(d.n/T))
}

var _ backend.AttnInRows = (*Backend)(nil)

// FusesAttnIn implements backend.AttnInRows: unless tuning.noAttnInRows.
func (b *Backend) FusesAttnIn() bool { return !b.attnInRowsOff.Load() }

// qkNormRowsMax is the most rows qk_norm_rope_kv_rows takes: each of a
// row's nh + nkv blocks reads its whole norm group, so the launch reads q
// and k (nh + nkv) / groups times over. Measured on an H100
// (results/prefill-s33, OLMoE shape, two runs): prompt tok/s +9% at 16
// tokens and within the runs' spread at 64 with it; at 512 the separate
// ops were 3% faster.
const qkNormRowsMax = 64

// QKRoPEKVRows implements backend.AttnInRows, in one launch where it can:
// qk_norm_rope_kv_rows (norms set, at most qkNormRowsMax rows: a block a
// head of each row, its group's inverse RMS with rmsnorm_group's sum order,
// so the bits of RMSNorm, then RoPERows and KVAppendRows; longer batches
// run those ops) or rope_kv_rows (no norms). The measurement was of the
// fused attn-in and the warp top-k together (bench mode batched-tc-sep turns
// both off); Qwen1.5-MoE's shape, without norms, was within its spread.
func (b *Backend) QKRoPEKVRows(qo, q, k, v, kCache, vCache, qNorm, kNorm backend.Tensor, T, pos0, nHeads, nKVHeads, headDim int, theta float64, eps float32) error {
	kc, vc, err := b.kvCaches("QKRoPEKVRows", kCache, vCache)
	if err != nil {
		return err
	}
	var ts [4]*Tensor
	for i, x := range []struct {
		what string
		t    backend.Tensor
	}{{"qo", qo}, {"q", q}, {"k", k}, {"v", v}} {
		if ts[i], err = b.tensorOf("QKRoPEKVRows", x.what, x.t, backend.F32); err != nil {
			return err
		}
	}
	qot, qt, kt, vt := ts[0], ts[1], ts[2], ts[3]
	Q, KV := nHeads*headDim, nKVHeads*headDim
	if T <= 0 || nHeads <= 0 || nKVHeads <= 0 || headDim%2 != 0 || headDim > attHeadDimMax || qt.n != T*Q || qot.n != qt.n ||
		kt.n != T*KV || vt.n != kt.n || pos0 < 0 || (pos0+T)*KV > kc.n {
		return shapeErr("QKRoPEKVRows", "q %d, qo %d, k %d, v %d values for %d rows of %d / %d heads x %d at position %d, a %d-value cache",
			qt.n, qot.n, kt.n, vt.n, T, nHeads, nKVHeads, headDim, pos0, kc.n)
	}
	kk := b.k.kv[kvIndex(kc.dt)]
	if qNorm == nil && kNorm == nil {
		if qot.ptr != qt.ptr {
			return errors.New("cuda: QKRoPEKVRows: without norms qo must be q")
		}
		nb := (Q/2 + KV/2 + KV + block - 1) / block
		b.countAttnInRows()
		return b.launchAsync("QKRoPEKVRows", kk.ropeKVRows, T*nb, block, 0, argPtr(qt.ptr), argPtr(kt.ptr), argPtr(vt.ptr),
			argPtr(kc.ptr), argPtr(vc.ptr), argInt(nHeads), argInt(nKVHeads), argInt(headDim), argInt(pos0), argF64(theta), argInt(nb))
	}
	if qNorm == nil || kNorm == nil {
		return errors.New("cuda: QKRoPEKVRows: a q norm without a k norm or the reverse")
	}
	qn, err := b.tensorOf("QKRoPEKVRows", "qNorm", qNorm, backend.F16, backend.F32)
	if err != nil {
		return err
	}
	kn, err := b.tensorOf("QKRoPEKVRows", "kNorm", kNorm, qn.dt)
	if err != nil {
		return err
	}
	if qn.n%headDim != 0 || kn.n%headDim != 0 || Q%qn.n != 0 || KV%kn.n != 0 {
		return shapeErr("QKRoPEKVRows", "norms of %d and %d values for %d / %d heads of %d", qn.n, kn.n, nHeads, nKVHeads, headDim)
	}
	if qot.ptr < qt.ptr+cu.DevicePtr(4*qt.n) && qt.ptr < qot.ptr+cu.DevicePtr(4*qot.n) {
		return errors.New("cuda: QKRoPEKVRows: qo overlaps q")
	}
	if T > qkNormRowsMax {
		// The separate ops (the same bits): each head's block of
		// qk_norm_rope_kv_rows recomputes its group's inverse RMS, which
		// costs more than the launches it saves on long batches.
		return backend.QKRoPEKVRowsOps(b, b, qo, q, k, v, kCache, vCache, qNorm, kNorm, T, pos0, nHeads, nKVHeads, headDim, theta, eps)
	}
	b.countAttnInRows()
	return b.launchAsync("QKRoPEKVRows", kk.qkNormRopeKVRows, T*(nHeads+nKVHeads), block, 0, argPtr(qot.ptr), argPtr(qt.ptr),
		argPtr(kt.ptr), argPtr(vt.ptr), argPtr(kc.ptr), argPtr(vc.ptr), argPtr(qn.ptr), argPtr(kn.ptr), argInt(wkind(qNorm)),
		argInt(nHeads), argInt(nKVHeads), argInt(headDim), argInt(qn.n), argInt(kn.n), argInt(pos0), argF64(theta), argF32(eps))
}

// countAttnInRows counts a QKRoPEKVRows launch (on the owner thread, as the
// other launch counters).
func (b *Backend) countAttnInRows() {
	_ = b.o.async(func() error {
		b.attnInRowsLaunches++
		return nil
	})
}
