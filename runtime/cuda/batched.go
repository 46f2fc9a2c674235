//go:build cuda

package cuda

import (
	"encoding/binary"
	"fmt"

	"gorgonia.org/cu"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// The batched ops (backend.Batched) of prefill: one launch of a
// kernels/matmul.cu kernel reads each weight row once per group of 8 (or 4)
// tokens staged in shared memory, and gives every (row, token) the bits of
// the per-token row kernel (MatVec, ExpertMatVec), so the engine's batched
// prefill runs on the GPU with token-at-a-time prefill's logits. A matrix
// whose staged activations would not fit shared memory even for 4 tokens
// runs as T per-token launches of the row kernel instead (the same bits).

var _ backend.Batched = (*Backend)(nil)

// matmulTB lists the token-group sizes compiled (kernel suffix _b8, _b4),
// largest first.
var matmulTB = [2]int{8, 4}

// Rows implements backend.Batched: a view of rows [lo, lo+n) of a [*,
// width] FP32 tensor. Unlike View it may start at any value: the row
// kernels' staging reads a vector 16 bytes at a time only when it is
// aligned (stage_values), and the engine's widths are multiples of 4.
func (b *Backend) Rows(t backend.Tensor, width, lo, n int) (backend.Tensor, error) {
	p, err := b.tensorOf("Rows", "t", t, backend.F32)
	if err != nil {
		return nil, err
	}
	if width <= 0 || lo < 0 || n < 0 || (lo+n)*width > p.n {
		return nil, shapeErr("Rows", "rows [%d, %d) of width %d in %d values", lo, lo+n, width, p.n)
	}
	return &Tensor{ptr: p.ptr + cu.DevicePtr(lo*width*4), n: n * width, dt: backend.F32, bytes: n * width * 4, b: b, view: true}, nil
}

// MatMul implements backend.Batched: dst[t] = W · x[t] (+ bias), W FP16.
func (b *Backend) MatMul(dst, w, x, bias backend.Tensor, T int) error {
	return b.matMulOp("MatMul", dst, w, x, bias, T, false)
}

// matMulOp is MatMul (op names it in errors), on activations rounded to
// FP16 when a16 is set (MatMulA16, activations.go).
func (b *Backend) matMulOp(op string, dst, w, x, bias backend.Tensor, T int, a16 bool) error {
	d, err := b.tensorOf(op, "dst", dst, backend.F32)
	if err != nil {
		return err
	}
	wt, err := b.tensorOf(op, "w", w, backend.F16)
	if err != nil {
		return err
	}
	xt, err := b.tensorOf(op, "x", x, backend.F32)
	if err != nil {
		return err
	}
	if T <= 0 || d.n%T != 0 || xt.n%T != 0 {
		return shapeErr(op, "dst %d and x %d values for %d tokens", d.n, xt.n, T)
	}
	rows, cols := d.n/T, xt.n/T
	if rows*cols != wt.n {
		return shapeErr(op, "W has %d values, want [%d, %d]", wt.n, rows, cols)
	}
	var bp cu.DevicePtr
	bk := 0
	if bias != nil {
		bt, err := b.tensorOf(op, "bias", bias, backend.F16, backend.F32)
		if err != nil {
			return err
		}
		if bt.n != rows {
			return shapeErr(op, "bias has %d values, want %d", bt.n, rows)
		}
		bp, bk = bt.ptr, 1
		if bt.dt == backend.F32 {
			bk = 2
		}
	}
	return b.o.async(func() error {
		if a16 {
			return b.matmulA16(d.ptr, wt.ptr, xt.ptr, bp, bk, rows, cols, T)
		}
		return b.matmul(1, d.ptr, wt.ptr, xt.ptr, bp, bk, rows, cols, 0, 0, T, nil, nil)
	})
}

// ExpertMatMul implements backend.Batched: dst[dstRows[i]] = M · x[xRows[i]].
func (b *Backend) ExpertMatMul(dst backend.Tensor, dstRows []int, rec backend.Tensor, m qpack.MatrixLayout, scheme qpack.Scheme, x backend.Tensor, xRows []int) error {
	a, err := b.expertArgs("ExpertMatMul", dst, dstRows, rec, m, scheme, x, xRows)
	if err != nil || len(dstRows) == 0 {
		return err
	}
	return b.o.async(func() error {
		if b.tcExperts() {
			return b.matmulTC(a.kind, a.y, a.mat, a.x, 0, 0, m.Rows, m.Cols, m.ColsPadded, m.ScalesOffset, len(a.xr), a.nx, a.xr, a.dr)
		}
		return b.matmulRows(a.kind, a.y, a.mat, a.x, 0, 0, m.Rows, m.Cols, m.ColsPadded, m.ScalesOffset, len(a.xr), a.xr, a.dr)
	})
}

// expertCall is one expert's checked ExpertMatMul: the output, matrix and
// input pointers, the matrix kind (0 int4, 1 FP16) and copies of its rows.
type expertCall struct {
	y, mat, x cu.DevicePtr
	kind      int
	nx        int // rows of x (the pre-split's extent)
	xr, dr    []int
}

// expertArgs checks an ExpertMatMul's arguments (op names the caller in
// errors).
func (b *Backend) expertArgs(op string, dst backend.Tensor, dstRows []int, rec backend.Tensor, m qpack.MatrixLayout, scheme qpack.Scheme, x backend.Tensor, xRows []int) (expertCall, error) {
	var a expertCall
	d, err := b.tensorOf(op, "dst", dst, backend.F32)
	if err != nil {
		return a, err
	}
	r, err := b.tensorOf(op, "rec", rec, backend.Bytes)
	if err != nil {
		return a, err
	}
	xt, err := b.tensorOf(op, "x", x, backend.F32)
	if err != nil {
		return a, err
	}
	if m.Offset < 0 || m.Offset+m.Bytes > r.n || m.Rows <= 0 || m.Cols <= 0 {
		return a, shapeErr(op, "a [%d, %d] matrix at [%d, %d) of a %d-byte record", m.Rows, m.Cols, m.Offset, m.Offset+m.Bytes, r.n)
	}
	if len(dstRows) != len(xRows) || d.n%m.Rows != 0 || xt.n%m.Cols != 0 {
		return a, shapeErr(op, "%d destination rows for %d inputs, dst %d values (rows of %d), x %d (rows of %d)",
			len(dstRows), len(xRows), d.n, m.Rows, xt.n, m.Cols)
	}
	nd, nx := d.n/m.Rows, xt.n/m.Cols
	for i := range dstRows {
		if dstRows[i] < 0 || dstRows[i] >= nd || xRows[i] < 0 || xRows[i] >= nx {
			return a, shapeErr(op, "pair %d: dst row %d of %d, x row %d of %d", i, dstRows[i], nd, xRows[i], nx)
		}
	}
	switch scheme {
	case qpack.SchemeInt4:
		if err := checkInt4Layout(m); err != nil {
			return a, fmt.Errorf("cuda: %s: %w", op, err)
		}
	case qpack.SchemeFP16:
		if m.Offset%16 != 0 {
			return a, fmt.Errorf("cuda: %s: fp16 matrix at offset %d is not 16-byte aligned", op, m.Offset)
		}
		a.kind = 1
	default:
		return a, fmt.Errorf("cuda: %s: unknown scheme %q", op, scheme)
	}
	a.y, a.mat, a.x, a.nx = d.ptr, r.ptr+cu.DevicePtr(m.Offset), xt.ptr, nx
	a.xr, a.dr = append([]int(nil), xRows...), append([]int(nil), dstRows...)
	return a, nil
}

var _ backend.ExpertGroups = (*Backend)(nil)

// ExpertMatMulGroup implements backend.ExpertGroups. On the tensor cores
// (tcExperts) the experts run as one launch of matmul_tc_grouped_* (each
// pair gets the bits of its expert's own tensor-core launch: the same block
// body on the same pairs); on the row kernels one by one as ExpertMatMul
// runs them. An expert is few blocks (a 1024 x 2048 gate over 64 pairs is
// 16), so one launch for a wave fills the GPU where the per-expert launches
// left most of it idle.
func (b *Backend) ExpertMatMulGroup(dst backend.Tensor, dstRows [][]int, recs []backend.Tensor, m qpack.MatrixLayout, scheme qpack.Scheme, x backend.Tensor, xRows [][]int) error {
	if len(dstRows) != len(recs) || len(xRows) != len(recs) {
		return shapeErr("ExpertMatMulGroup", "%d experts, %d destination row lists, %d input row lists", len(recs), len(dstRows), len(xRows))
	}
	calls := make([]expertCall, 0, len(recs))
	for j := range recs {
		a, err := b.expertArgs("ExpertMatMulGroup", dst, dstRows[j], recs[j], m, scheme, x, xRows[j])
		if err != nil {
			return fmt.Errorf("expert %d of %d: %w", j, len(recs), err)
		}
		if len(a.xr) > 0 {
			calls = append(calls, a)
		}
	}
	return b.o.async(func() error {
		if b.tcExperts() {
			return b.matmulTCGrouped(calls, m)
		}
		for _, a := range calls {
			if err := b.matmulRows(a.kind, a.y, a.mat, a.x, 0, 0, m.Rows, m.Cols, m.ColsPadded, m.ScalesOffset, len(a.xr), a.xr, a.dr); err != nil {
				return err
			}
		}
		return nil
	})
}

// tcGroupBytes is the size of one entry of a grouped launch's table
// (kernels/matmul_tc.cu tc_group: the matrix pointer, the first pair and
// the pair count).
const tcGroupBytes = 16

// matmulTCGrouped launches the tensor-core kernel once for calls (one
// layout, one output, one input): a table entry per 64 pairs of each
// expert (per 16 for the small-entry kernel: tcGroupTile), then every
// pair's input rows and output rows, in one upload. A table that does not
// fit an upload slot runs as one launch per expert.
// Owner thread only.
func (b *Backend) matmulTCGrouped(calls []expertCall, m qpack.MatrixLayout) error {
	if len(calls) == 0 {
		return nil
	}
	fn, smem := b.tcGroupedKernel(calls)
	tile := b.tcGroupTile(fn)
	entries, pairs := 0, 0
	for _, a := range calls {
		entries += (len(a.xr) + tile - 1) / tile
		pairs += len(a.xr)
	}
	buf := make([]byte, tcGroupBytes*entries+8*pairs)
	if len(buf) > b.ring.slotBytes {
		for _, a := range calls {
			if err := b.matmulTC(a.kind, a.y, a.mat, a.x, 0, 0, m.Rows, m.Cols, m.ColsPadded, m.ScalesOffset, len(a.xr), a.nx, a.xr, a.dr); err != nil {
				return err
			}
		}
		return nil
	}
	xo, yo := tcGroupBytes*entries, tcGroupBytes*entries+4*pairs
	e, p := 0, 0
	for _, a := range calls {
		for i := 0; i < len(a.xr); i += tile {
			ent := buf[tcGroupBytes*e:]
			binary.LittleEndian.PutUint64(ent, uint64(a.mat))
			binary.LittleEndian.PutUint32(ent[8:], uint32(p+i))
			binary.LittleEndian.PutUint32(ent[12:], uint32(min(tile, len(a.xr)-i)))
			e++
		}
		for i := range a.xr {
			binary.LittleEndian.PutUint32(buf[xo+4*(p+i):], uint32(int32(a.xr[i])))
			binary.LittleEndian.PutUint32(buf[yo+4*(p+i):], uint32(int32(a.dr[i])))
		}
		p += len(a.xr)
	}
	base, err := b.indexUpload(buf)
	if err != nil {
		return err
	}
	tiles := (m.Rows + tcRowTile - 1) / tcRowTile
	b.tcLaunches++
	a := calls[0]
	if !b.tune.tcNoPreSplit {
		sp, err := b.groupedPresplit(fn, a.x, a.nx, m.Cols)
		if err != nil {
			return err
		}
		return b.launch(fn, entries*tiles, tcThreads, smem, argPtr(a.y), argPtr(sp.hi), argPtr(sp.lo),
			argPtr(sp.inv), argPtr(base), argInt(tiles), argInt(m.Rows), argInt(m.Cols), argInt(m.ColsPadded), argInt(m.ScalesOffset),
			argPtr(base+cu.DevicePtr(xo)), argPtr(base+cu.DevicePtr(yo)))
	}
	return b.launch(fn, entries*tiles, tcThreads, smem, argPtr(a.y), argPtr(a.x), argPtr(base), argInt(tiles),
		argInt(m.Rows), argInt(m.Cols), argInt(m.ColsPadded), argInt(m.ScalesOffset), argPtr(base+cu.DevicePtr(xo)), argPtr(base+cu.DevicePtr(yo)))
}

// matmul launches y[yrow(t)] = M · x[xrow(t)] (+ bias) for t < T; owner
// thread only. kind 0: M is int4 (cols_padded, scales_offset locate its
// scales), 1: FP16. xrows, yrows nil: row t. The token group is the
// largest compiled size whose staged vectors fit shared memory; when none
// does, T per-token launches of the row kernel run instead.
func (b *Backend) matmul(kind int, y, mat, x, bias cu.DevicePtr, biasKind, rows, cols, colsPadded, scalesOffset, T int, xrows, yrows []int) error {
	if b.tcMatmul(T) {
		return b.matmulTC(kind, y, mat, x, bias, biasKind, rows, cols, colsPadded, scalesOffset, T, T, xrows, yrows)
	}
	return b.matmulRows(kind, y, mat, x, bias, biasKind, rows, cols, colsPadded, scalesOffset, T, xrows, yrows)
}

// matmulRows is matmul on the row kernels (kernels/matmul.cu): each
// (row, token) gets the per-token row kernel's bits; owner thread only.
func (b *Backend) matmulRows(kind int, y, mat, x, bias cu.DevicePtr, biasKind, rows, cols, colsPadded, scalesOffset, T int, xrows, yrows []int) error {
	stride := stagedBytes(qpack.SchemeFP16, cols)
	if kind == 0 {
		stride = stagedBytes(qpack.SchemeInt4, cols)
	}
	ti := -1
	for i, tb := range matmulTB {
		if tb*stride <= b.smemMax {
			ti = i
			break
		}
	}
	if ti < 0 {
		return b.matmulByToken(kind, y, mat, x, bias, biasKind, rows, cols, colsPadded, scalesOffset, T, xrows, yrows)
	}
	var xp, yp cu.DevicePtr
	if xrows != nil {
		var err error
		if xp, yp, err = b.rowIndex(xrows, yrows); err != nil {
			return err
		}
	}
	tb := matmulTB[ti]
	fn := b.k.matmul[kind][ti]
	smem := tb * stride
	// tpw row tasks per warp: 4, fewer while that leaves under two waves
	// of blocks.
	tasks := (rows + 1) / 2
	G := (T + tb - 1) / tb
	tpw := 4
	for tpw > 1 && ((tasks+8*tpw-1)/(8*tpw))*G < 2*b.residentBlocks(fn, smem) {
		tpw /= 2
	}
	grid := (tasks + 8*tpw - 1) / (8 * tpw) * G
	return b.launch(fn, grid, block, smem, argPtr(y), argPtr(mat), argPtr(x), argPtr(bias), argInt(biasKind),
		argInt(rows), argInt(cols), argInt(colsPadded), argInt(scalesOffset), argInt(T), argPtr(xp), argPtr(yp), argInt(tpw))
}

// Tensor-core matmul (kernels/matmul_tc.cu): 256-thread blocks of 64
// tokens x 128 matrix rows, tcSmem bytes of dynamic shared memory
// (TC_SMEM there: two pipeline stages).
const (
	tcTile    = 64  // tokens (pairs) a block
	tcRowTile = 128 // matrix rows a block
	tcThreads = 256
	tcSmem    = 2 * ((2*tcTile+tcRowTile)*40*2 + (tcTile+tcRowTile)*4)
	// tcRingSlots is matmul_tc.cu's TC_RING; tcSmemRing its TC_SMEM_RING
	// (the slots' codes, tcThreads x 8 bytes, and scale words, tcRowTile x
	// 4 bytes, after the two stages).
	tcRingSlots = 12
	tcSmemRing  = tcSmem + tcRingSlots*(tcThreads*8+tcRowTile*4)
	// tcSmemRingF16 is TC_SMEM_RING_F16: 6 slots of an FP16 chunk (tcThreads
	// x 32 bytes) after the two stages.
	tcSmemRingF16 = tcSmem + 6*tcThreads*32
	// tcSmemRing2 is TC_SMEM_RING2: two stages of two chunks and 10 slots
	// (the _ring2 kernels, tuning.tcRing2).
	tcSmemRing2 = 2*tcSmem + 10*(tcThreads*8+tcRowTile*4)
	// tcSmemFD is TC_SMEM_FD: two stages of an entry's tcTile tokens' hi
	// and lo halves over 4 chunks (rows of 136 halves) and their 2^-s (the
	// fragment-direct kernel, tcGroupedFD).
	tcSmemFD = 2 * (2*tcTile*136*2 + 4*tcTile*4)
	// tcSmemBurst is TC_SMEM_BURST: 5 of the two-stage kernel's stages
	// (the burst split-K kernel, tcDenseBurst).
	tcSmemBurst = 5 * (tcSmem / 2)
	// tcFD16Tile is the most pairs an entry of the small-entry
	// fragment-direct kernel holds (TC_FD16_BM), tcSmemFD16 its
	// TC_SMEM_FD16: the same stages for tcFD16Tile tokens.
	tcFD16Tile = 16
	tcSmemFD16 = 2 * (2*tcFD16Tile*136*2 + 4*tcFD16Tile*4)
	// tcSmemFD16S3 is its three-stage build's (TC_SMEM_FD16_S3).
	tcSmemFD16S3 = 3 * (2*tcFD16Tile*136*2 + 4*tcFD16Tile*4)
	// tcNarrowTile is the most pairs a narrow grouped kernel's entry holds
	// (matmul_tc.cu's NARROW mapping covers a block's first 32 tokens).
	tcNarrowTile = 32
	tcMinTokens  = 16
)

// tcMatmul is the kernel-choice predicate of the batched ops: a batch of T
// tokens (an expert's pairs, for the expert ops) runs on the tensor cores
// when T is at least tcMinTokens (below that most of a 64-token tile would
// be padding; the row kernels run instead) and tuning.noMatmulTC is unset.
// The choice depends on T alone, so a token's results still do not depend
// on capacity, wave or step mode. On the H200 the tensor cores with the
// grouped launch prefilled 512 tokens at 2.2x the row kernels' rate on the
// OLMoE-1B-7B shape and 1.8x on Qwen1.5-MoE (results/prefill-h200-s16).
func (b *Backend) tcMatmul(T int) bool { return !b.tune.noMatmulTC && T >= tcMinTokens }

// tcExperts is the kernel-choice predicate of the batched expert ops
// (ExpertMatMul, ExpertMatMulGroup): every expert runs on the tensor cores,
// whatever its pair count, unless tuning.noMatmulTC is set. A prefill of
// 57 tokens routes ~7 pairs to each of a layer's 64 experts (OLMoE-1B-7B
// shape): on the row kernels that is one launch per expert and matrix,
// while the grouped tensor-core launch takes the layer's experts at once
// and reads each weight tile once, the padded tokens costing only mma
// slots. Like tcMatmul it depends on nothing a capacity, wave or step mode
// changes.
func (b *Backend) tcExperts() bool { return !b.tune.noMatmulTC }

// matmulTC launches matmul_tc_w4a16 (kind 0) or matmul_tc_f16 (kind 1):
// one block per (128-row tile, 64-token group), consecutive blocks sharing
// a tile; owner thread only.
func (b *Backend) matmulTC(kind int, y, mat, x, bias cu.DevicePtr, biasKind, rows, cols, colsPadded, scalesOffset, T, nx int, xrows, yrows []int) error {
	if ks := b.tcSplit(T, rows, cols); kind == 1 && xrows == nil && ks > 1 {
		return b.matmulTCSplitK(y, mat, x, bias, biasKind, rows, cols, T, ks)
	}
	var xp, yp cu.DevicePtr
	if xrows != nil {
		var err error
		if xp, yp, err = b.rowIndex(xrows, yrows); err != nil {
			return err
		}
	}
	grid := (rows + tcRowTile - 1) / tcRowTile * ((T + tcTile - 1) / tcTile)
	b.tcLaunches++
	if !b.tune.tcNoPreSplit {
		sp, err := b.tcPresplit(x, nx, cols)
		if err != nil {
			return err
		}
		fn, smem := b.k.matmulTCPre[kind], tcSmem
		if b.tcDenseRing(kind) {
			fn, smem = b.k.matmulTCPreRingF16, tcSmemRingF16
		}
		return b.launch(fn, grid, tcThreads, smem, argPtr(y), argPtr(mat), argPtr(sp.hi), argPtr(sp.lo),
			argPtr(sp.inv), argPtr(bias), argInt(biasKind), argInt(rows), argInt(cols), argInt(colsPadded), argInt(scalesOffset),
			argInt(T), argPtr(xp), argPtr(yp))
	}
	return b.launch(b.k.matmulTC[kind], grid, tcThreads, tcSmem, argPtr(y), argPtr(mat), argPtr(x), argPtr(bias), argInt(biasKind),
		argInt(rows), argInt(cols), argInt(colsPadded), argInt(scalesOffset), argInt(T), argPtr(xp), argPtr(yp))
}

// tcGroupedRing says whether a grouped expert matmul of matrix kind (0
// int4, 1 FP16) streams its codes through the cp.async ring
// (matmul_tc_grouped_{,pre_}ring_w4a16): int4 only, unless tuning.tcNoRing.
// Measured 7-18% faster prefill than the two-stage kernel at 16-64 prompt tokens,
// even to 3-5% slower at 512, 2-7% faster at 2,048 (results/h200-s20).
func (b *Backend) tcGroupedRing(kind int) bool { return kind == 0 && !b.tune.tcNoRing }

// tcFDPairsPerExpert is the most pairs an expert, on average over a
// grouped launch's experts, for which the fragment-direct kernel runs.
const tcFDPairsPerExpert = 64

// tcGroupedFD is the kernel-choice predicate of the fragment-direct
// grouped kernel (matmul_tc_grouped_pre_fd_w4a16; the same bits as the
// ring): an int4 launch with pre-split activations whose pairs average at
// most tcFDPairsPerExpert an expert (tuning.tcFDAlways: any such launch;
// tuning.tcNoFD: none). On the H100 (results/h100-s25) it was 7-12% faster
// than the ring at 64-token prompts (8 pairs an expert on the OLMoE-1B-7B
// shape, 4.3 on Qwen1.5-MoE's) and 2-6% slower at 512 (64 and 34) on the
// read-back path, so the bound was 32 until session 32. With session 31's
// leaner body it beat the ring at 512 tokens too (results/prefill-s32, H100:
// prompt tok/s +6.5% OLMoE, +3.2% Qwen in one run; Nsight Compute, 11.5
// against 12.7 ms of grouped kernels a 512-token OLMoE prefill), so the
// bound is 64; above it (1,024 tokens and more) the ring stays, not
// measured against it. It depends on the launch's pairs and experts alone,
// not on capacity or step mode. Under tuning.tcA16 or tcA16Row it takes
// every int4 launch (the ring has no FP16 build).
func (b *Backend) tcGroupedFD(kind, pairs, experts int) bool {
	if kind != 0 || b.tune.tcNoPreSplit || b.tune.tcNoFD {
		return false
	}
	// The FP16-activation knobs run it for every launch: the ring has no
	// FP16 build.
	return b.tune.tcFDAlways || b.tune.tcA16 || b.a16Row() || pairs <= tcFDPairsPerExpert*experts
}

// tcGroupedFD16 is the kernel-choice predicate of the small-entry
// fragment-direct kernel (matmul_tc_grouped_pre_fd16_w4a16, the same bits):
// a launch tcGroupedFD picks whose pairs average at most tcFD16Tile an
// expert (tuning.tcNoFD16: none). Its table's entries hold at most tcFD16Tile
// pairs (tcGroupTile), so an expert with more is read once per sixteen.
// Like tcGroupedFD it depends on the launch's pairs and experts alone.
func (b *Backend) tcGroupedFD16(kind, pairs, experts int) bool {
	return !b.tune.tcNoFD16 && b.tcGroupedFD(kind, pairs, experts) && pairs <= tcFD16Tile*experts
}

// fd16Kernel is the small-entry fragment-direct kernel and its dynamic
// shared memory: the two-stage build, or under tuning.tcFD16S3 the
// three-stage one (matmul_tc_grouped_pre_fd16_s3_w4a16: each slice of
// activations staged two slices ahead; the same bits); under tuning.tcA16
// or tcA16Row its FP16-activation build (other bits) before either.
func (b *Backend) fd16Kernel() (cu.Function, int) {
	if b.a16Row() {
		return b.k.matmulTCGroupedA16R[1], tcSmemFD16
	}
	if b.tune.tcA16 {
		return b.k.matmulTCGroupedA16[1], tcSmemFD16
	}
	if b.tune.tcFD16S3 {
		return b.k.matmulTCGroupedFD16S3, tcSmemFD16S3
	}
	return b.k.matmulTCGroupedFD16, tcSmemFD16
}

// fdKernel is the fragment-direct grouped kernel and its dynamic shared
// memory: matmul_tc_grouped_pre_fd_w4a16, or its FP16-activation build
// under tuning.tcA16 (_a16) or tcA16Row (_a16r; other bits either way).
func (b *Backend) fdKernel() (cu.Function, int) {
	if b.a16Row() {
		return b.k.matmulTCGroupedA16R[0], tcSmemFD
	}
	if b.tune.tcA16 {
		return b.k.matmulTCGroupedA16[0], tcSmemFD
	}
	return b.k.matmulTCGroupedFD, tcSmemFD
}

// tcGroupTile is the most pairs a grouped launch's table entry holds for
// kernel fn: tcFD16Tile for the small-entry kernel, else tcTile.
func (b *Backend) tcGroupTile(fn cu.Function) int {
	if fn == b.k.matmulTCGroupedFD16 || fn == b.k.matmulTCGroupedFD16S3 || fn == b.k.matmulTCGroupedA16[1] || fn == b.k.matmulTCGroupedA16R[1] {
		return tcFD16Tile
	}
	return tcTile
}

// tcDenseFD says whether an FP16 split-K matmul of cols columns runs the
// fragment-direct twin (matmul_tc_f16_pre_splitk_fd, on the pre-split
// activations; its weight words need even columns): under
// tuning.tcFDSplitK, with the pre-split on. The same partials, bit for bit.
func (b *Backend) tcDenseFD(cols int) bool {
	return b.tune.tcFDSplitK && !b.tune.tcNoPreSplit && cols%2 == 0
}

// tcBurstMinChunks is the fewest chunks a split-K block's share holds for
// the burst twin to run (tcDenseBurst).
const tcBurstMinChunks = 8

// tcDenseBurst says whether an FP16 split-K matmul of cols columns in ks
// splits runs the burst twin (matmul_tc_f16_pre_splitk_burst, on the
// pre-split activations; one 16-byte copy a row segment needs columns a
// multiple of 8 and the matrix 16-byte aligned): the default where a
// block's share is at least tcBurstMinChunks chunks, with the pre-split on
// (tuning.tcNoBurst: never). The opt-in twins (tuning.tcFDSplitK,
// tuning.tcRingF16) come first. The same partials, bit for bit. Measured
// on an H100 (results/prefill-s32, up to three runs), everywhere: prompt
// tok/s +1-5% at 16 tokens, -5% to +0.5% at 64 (Qwen1.5-MoE -1.3, -4.9 and
// -3.1% in three runs), +0.2-0.9% at 256 and +1.2-4% at 512, against the
// two-stage kernel. A 2048-column projection's blocks hold 4 chunks up to
// 64 tokens (16 splits) and 13-22 from 256 (3-5 splits): the burst pays
// where a block's chunks are many, not at 4; at 16 tokens the gain was the
// padding tiles it skipped, which the two-stage kernel now skips too. It
// depends on the shapes and ks (T, rows and cols) alone.
func (b *Backend) tcDenseBurst(mat cu.DevicePtr, cols, ks int) bool {
	per := ((cols+31)/32 + ks - 1) / ks
	return !b.tune.tcNoBurst && !b.tune.tcNoPreSplit && cols%8 == 0 && mat%16 == 0 && per >= tcBurstMinChunks
}

// tcGroupedNarrow says whether a grouped ring launch of calls runs the
// narrow twins (tuning.tcNarrow): every expert's pairs fit one entry of at
// most tcNarrowTile, the tokens the narrow mapping covers.
func (b *Backend) tcGroupedNarrow(calls []expertCall) bool {
	if !b.tune.tcNarrow {
		return false
	}
	for _, a := range calls {
		if len(a.xr) > tcNarrowTile {
			return false
		}
	}
	return true
}

// tcGroupedKernel picks a grouped launch's kernel and its dynamic shared
// memory: the two-stage kernel, or the int4 ring (tcGroupedRing) with one
// or two chunks a stage (tuning.tcRing2), wide or narrow
// (tcGroupedNarrow); each with the activations split before it (the
// default) or in the kernel (tuning.tcNoPreSplit). An int4 launch that
// tcGroupedFD picks runs the fragment-direct kernel instead, whatever the
// ring tunings say.
func (b *Backend) tcGroupedKernel(calls []expertCall) (cu.Function, int) {
	pre := 1
	if b.tune.tcNoPreSplit {
		pre = 0
	}
	kind := calls[0].kind
	pairs := 0
	for _, a := range calls {
		pairs += len(a.xr)
	}
	switch ring2, narrow := b.tune.tcRing2, b.tcGroupedNarrow(calls); {
	case b.tcGroupedFD16(kind, pairs, len(calls)):
		return b.fd16Kernel()
	case b.tcGroupedFD(kind, pairs, len(calls)):
		return b.fdKernel()
	case !b.tcGroupedRing(kind):
		if pre == 1 {
			return b.k.matmulTCGroupedPre[kind], tcSmem
		}
		return b.k.matmulTCGrouped[kind], tcSmem
	case narrow && ring2:
		return b.k.matmulTCGroupedNarrow[1][pre], tcSmemRing2
	case narrow:
		return b.k.matmulTCGroupedNarrow[0][pre], tcSmemRing
	case ring2:
		return b.k.matmulTCGroupedRing2[pre], tcSmemRing2
	}
	return b.k.matmulTCGroupedRing[pre], tcSmemRing
}

// tcDenseRing says whether a dense tensor-core matmul of matrix kind (1
// FP16) runs the ring twin of its split-K or pre-split kernel
// (matmul_tc_f16_splitk_ring, matmul_tc_pre_ring_f16): only under
// tuning.tcRingF16, measured 10-21% slower on Qwen's shared expert from 64
// tokens on (results/h200-s20).
func (b *Backend) tcDenseRing(kind int) bool { return kind == 1 && b.tune.tcRingF16 }

// tcSplitX locates a pre-split's arrays (kernels/matmul_tc.cu TcSplitX).
type tcSplitX struct{ hi, lo, inv cu.DevicePtr }

// tcPresplit splits the nx rows of x [nx][cols] once (tc_split_rows) into
// the backend's pre-split scratch, for a _pre matmul to copy instead of
// splitting them again in every row tile (the default; tuning.tcNoPreSplit turns it off); owner thread
// only. The same bits as the in-kernel split.
func (b *Backend) tcPresplit(x cu.DevicePtr, nx, cols int) (tcSplitX, error) {
	sp, grid, err := b.presplitBuf(nx, cols)
	if err != nil {
		return tcSplitX{}, fmt.Errorf("cuda: pre-split of %d rows: %w", nx, err)
	}
	err = b.launch(b.k.tcSplitRows, grid, block, 0, argPtr(x), argInt(nx), argInt(cols), argPtr(sp.hi), argPtr(sp.lo), argPtr(sp.inv))
	return sp, err
}

// presplitBuf lays out the pre-split scratch for nx rows of cols values
// (grown as needed): hi and lo, nx x chunks x 32 FP16 values each, then
// inv, nx x chunks floats; and the split kernels' grid (four threads a
// chunk). Owner thread only.
func (b *Backend) presplitBuf(nx, cols int) (tcSplitX, int, error) {
	nck := (cols + 31) / 32
	halves := nx * nck * 32
	if err := b.scratch(&b.tcSplitBuf, halves+nx*nck); err != nil {
		return tcSplitX{}, 0, err
	}
	base := b.tcSplitBuf.ptr
	sp := tcSplitX{hi: base, lo: base + cu.DevicePtr(2*halves), inv: base + cu.DevicePtr(4*halves)}
	return sp, min((4*nx*nck+block-1)/block, 2048), nil
}

// groupedPresplit is the pre-split grouped kernel fn reads: the row-shift
// one (tcPresplitRows) for the row-shift FP16 builds (tuning.tcA16Row),
// else tcPresplit's.
func (b *Backend) groupedPresplit(fn cu.Function, x cu.DevicePtr, nx, cols int) (tcSplitX, error) {
	for _, f := range [...]cu.Function{b.k.matmulTCGroupedA16R[0], b.k.matmulTCGroupedA16R[1], b.k.matmulTCGroupedGUA16R[0], b.k.matmulTCGroupedGUA16R[1]} {
		if fn == f {
			b.a16rSplits++
			return b.tcPresplitRows(x, nx, cols)
		}
	}
	return b.tcPresplit(x, nx, cols)
}

// tcPresplitRows is the row-shift FP16 pre-split of the nx rows of x
// [nx][cols] (tc_split_rows_a16r: hi = fp16(x 2^s) with s from the row's
// largest magnitude, inv = 2^-s a row) into the pre-split scratch; lo is
// hi (its kernels read no lo).
func (b *Backend) tcPresplitRows(x cu.DevicePtr, nx, cols int) (tcSplitX, error) {
	nck := (cols + 31) / 32
	halves := nx * nck * 32
	if err := b.scratch(&b.tcSplitBuf, halves/2+nx); err != nil {
		return tcSplitX{}, fmt.Errorf("cuda: row-shift pre-split of %d rows: %w", nx, err)
	}
	base := b.tcSplitBuf.ptr
	sp := tcSplitX{hi: base, lo: base, inv: base + cu.DevicePtr(2*halves)}
	err := b.launch(b.k.tcSplitRowsA16R, min(nx, 2048), block, 128, argPtr(x), argInt(nx), argInt(cols), argPtr(sp.hi), argPtr(sp.inv))
	return sp, err
}

// tcSplitGoal is the number of blocks a split-K matmul aims for: two per
// SM of the H200 (the kernel's occupancy). tuning.tcSplitGoal replaces it
// (a measurement knob: fewer splits, each of more chunks, with fewer
// partials to write and reduce; the split count changes a sum's order, so
// other bits).
const tcSplitGoal = 264

// tcSplit is the kernel-choice predicate of the split-K FP16 matmul
// (on unless tuning.tcNoSplitK): the number of column splits for a T-token matmul of a
// rows x cols matrix, 1 (no split) when the unsplit grid already has a block
// per SM or the tuning is off. Each split keeps at least 4 chunks of 32
// columns. It depends on T, rows and cols alone, so a capacity, wave or step
// mode cannot change a token's results.
func (b *Backend) tcSplit(T, rows, cols int) int {
	if b.tune.tcNoSplitK {
		return 1
	}
	goal := tcSplitGoal
	if b.tune.tcSplitGoal > 0 {
		goal = b.tune.tcSplitGoal
	}
	blocks := (rows + tcRowTile - 1) / tcRowTile * ((T + tcTile - 1) / tcTile)
	if blocks >= goal/2 {
		return 1
	}
	return max(1, min((goal+blocks-1)/blocks, (cols+31)/32/4))
}

// matmulTCSplitK is an FP16 matmulTC in ks column splits: matmul_tc_f16_splitk
// into ks partials, then matmul_splitk_reduce (the partials in split order,
// then the bias); owner thread only.
func (b *Backend) matmulTCSplitK(y, mat, x, bias cu.DevicePtr, biasKind, rows, cols, T, ks int) error {
	if err := b.splitKPartials(mat, x, rows, cols, T, ks); err != nil {
		return err
	}
	return b.launch(b.k.splitKReduce, b.elementwiseGrid(T*rows), block, 0, argPtr(y), argPtr(b.tcPart.ptr), argInt(ks), argInt(T),
		argInt(rows), argPtr(bias), argInt(biasKind))
}

// splitKPartials launches the split-K kernel of a T-token matmul of the
// FP16 rows x cols matrix mat into ks partials in b.tcPart: the
// fragment-direct twin where tcDenseFD picks it, the ring twin under
// tuning.tcRingF16, the burst twin where tcDenseBurst picks it (the
// default), else the two-stage kernel; owner thread only.
func (b *Backend) splitKPartials(mat, x cu.DevicePtr, rows, cols, T, ks int) error {
	if err := b.scratch(&b.tcPart, ks*T*rows); err != nil {
		return fmt.Errorf("cuda: split-K partials: %w", err)
	}
	grid := (rows + tcRowTile - 1) / tcRowTile * ((T + tcTile - 1) / tcTile) * ks
	b.tcLaunches++
	if b.tcDenseFD(cols) {
		sp, err := b.tcPresplit(x, T, cols)
		if err != nil {
			return err
		}
		return b.launch(b.k.matmulTCSplitKFD, grid, tcThreads, tcSmemFD, argPtr(b.tcPart.ptr), argPtr(mat), argPtr(sp.hi),
			argPtr(sp.lo), argPtr(sp.inv), argInt(rows), argInt(cols), argInt(T), argInt(ks))
	}
	if !b.tcDenseRing(1) && b.tcDenseBurst(mat, cols, ks) {
		sp, err := b.tcPresplit(x, T, cols)
		if err != nil {
			return err
		}
		fn := b.k.matmulTCSplitKBurst
		if b.tune.tcA16Dense {
			fn = b.k.matmulTCSplitKBurstA16
		}
		return b.launch(fn, grid, tcThreads, tcSmemBurst, argPtr(b.tcPart.ptr), argPtr(mat), argPtr(sp.hi),
			argPtr(sp.lo), argPtr(sp.inv), argInt(rows), argInt(cols), argInt(T), argInt(ks))
	}
	fn, smem := b.k.matmulTCSplitK, tcSmem
	if b.tcDenseRing(1) {
		fn, smem = b.k.matmulTCSplitKRing, tcSmemRingF16
	}
	return b.launch(fn, grid, tcThreads, smem, argPtr(b.tcPart.ptr), argPtr(mat), argPtr(x), argInt(rows),
		argInt(cols), argInt(T), argInt(ks))
}

// partsSplit is the kernel-choice predicate of MatMulParts' one launch
// (the default since session 32; tuning.noPartsFused turns it off; on an
// H100, results/prefill-s32, with the burst twin everywhere: +1-6% at 16,
// 256 and 512 tokens, -1.3% to +1.4% at 64): at most three blocks, each of
// whole 128-row tiles, all on the tensor cores' split-K kernel with one
// split count ks (tcSplit of each block's rows), so that the fused
// launch's tiles and chunk ranges are each block's own. It depends on T
// and the shapes alone.
func (b *Backend) partsSplit(T, cols int, rows []int) (ks int, ok bool) {
	if b.tune.noPartsFused || len(rows) > 3 || !b.tcMatmul(T) {
		return 0, false
	}
	for _, r := range rows {
		k := b.tcSplit(T, r, cols)
		if r%tcRowTile != 0 || k < 2 || (ks != 0 && k != ks) {
			return 0, false
		}
		ks = k
	}
	return ks, ks > 1
}

var _ backend.PartMatMuls = (*Backend)(nil)

// MatMulParts implements backend.PartMatMuls: where partsSplit allows, one
// split-K launch over the whole matrix and one matmul_splitk_reduce_parts
// into the blocks' outputs; otherwise one MatMul a block (each at its
// offset of w and bias). Either way each block's bits are its own
// MatMul's.
func (b *Backend) MatMulParts(dsts []backend.Tensor, rows []int, w, x, bias backend.Tensor, T int) error {
	return b.matMulPartsOp("MatMulParts", dsts, rows, w, x, bias, T, false)
}

// matMulPartsOp is MatMulParts (op names it in errors), on activations
// rounded to FP16 when a16 is set (MatMulPartsA16, activations.go).
func (b *Backend) matMulPartsOp(op string, dsts []backend.Tensor, rows []int, w, x, bias backend.Tensor, T int, a16 bool) error {
	if len(dsts) == 0 || len(dsts) != len(rows) {
		return shapeErr(op, "%d outputs for %d row blocks", len(dsts), len(rows))
	}
	wt, err := b.tensorOf(op, "w", w, backend.F16)
	if err != nil {
		return err
	}
	xt, err := b.tensorOf(op, "x", x, backend.F32)
	if err != nil {
		return err
	}
	if T <= 0 || xt.n%T != 0 {
		return shapeErr(op, "x %d values for %d tokens", xt.n, T)
	}
	cols, total := xt.n/T, 0
	ds := make([]*Tensor, len(dsts))
	for j, dst := range dsts {
		if ds[j], err = b.tensorOf(op, "dst", dst, backend.F32); err != nil {
			return err
		}
		if rows[j] <= 0 || ds[j].n != T*rows[j] {
			return shapeErr(op, "output %d has %d values, want %d tokens x %d rows", j, ds[j].n, T, rows[j])
		}
		total += rows[j]
	}
	if total*cols != wt.n {
		return shapeErr(op, "W has %d values, want [%d, %d]", wt.n, total, cols)
	}
	var bp cu.DevicePtr
	bk, bsize := 0, 0
	if bias != nil {
		bt, err := b.tensorOf(op, "bias", bias, backend.F16, backend.F32)
		if err != nil {
			return err
		}
		if bt.n != total {
			return shapeErr(op, "bias has %d values, want %d", bt.n, total)
		}
		bp, bk, bsize = bt.ptr, 1, 2
		if bt.dt == backend.F32 {
			bk, bsize = 2, 4
		}
	}
	return b.o.async(func() error {
		if ks, ok := b.partsSplit(T, cols, rows); ok {
			split := b.splitKPartials
			if a16 {
				split = b.splitKPartialsA16
			}
			if err := split(wt.ptr, xt.ptr, total, cols, T, ks); err != nil {
				return err
			}
			y := [3]cu.DevicePtr{}
			n := [2]int{}
			for j := range ds {
				y[j] = ds[j].ptr
				if j < 2 {
					n[j] = rows[j]
				}
			}
			return b.launch(b.k.splitKReduceParts, b.elementwiseGrid(T*total), block, 0, argPtr(y[0]), argPtr(y[1]), argPtr(y[2]),
				argPtr(b.tcPart.ptr), argInt(ks), argInt(T), argInt(total), argInt(n[0]), argInt(n[1]), argPtr(bp), argInt(bk))
		}
		off := 0
		for j := range ds {
			var bj cu.DevicePtr
			if bk != 0 {
				bj = bp + cu.DevicePtr(bsize*off)
			}
			mj := wt.ptr + cu.DevicePtr(2*off*cols)
			var err error
			if a16 {
				err = b.matmulA16(ds[j].ptr, mj, xt.ptr, bj, bk, rows[j], cols, T)
			} else {
				err = b.matmul(1, ds[j].ptr, mj, xt.ptr, bj, bk, rows[j], cols, 0, 0, T, nil, nil)
			}
			if err != nil {
				return fmt.Errorf("block %d: %w", j, err)
			}
			off += rows[j]
		}
		return nil
	})
}

// matmulByToken is matmul as T launches of the per-token row kernel.
func (b *Backend) matmulByToken(kind int, y, mat, x, bias cu.DevicePtr, biasKind, rows, cols, colsPadded, scalesOffset, T int, xrows, yrows []int) error {
	for t := range T {
		xr, yr := t, t
		if xrows != nil {
			xr, yr = xrows[t], yrows[t]
		}
		yt, xt := y+cu.DevicePtr(4*yr*rows), x+cu.DevicePtr(4*xr*cols)
		var err error
		if kind == 0 {
			err = b.matvecW4Launch("MatMul", yt, mat, xt, rows, cols, colsPadded, scalesOffset)
		} else {
			err = b.matvecF16Launch(yt, mat, xt, bias, biasKind, rows, cols, normSpec{})
		}
		if err != nil {
			return fmt.Errorf("token %d: %w", t, err)
		}
	}
	return nil
}

// rowIndex uploads the gather and scatter rows (int32, xrows then yrows)
// into the backend's index buffer (indexUpload); owner thread only.
func (b *Backend) rowIndex(xrows, yrows []int) (cu.DevicePtr, cu.DevicePtr, error) {
	n := len(xrows)
	buf := make([]byte, 8*n)
	for i := range n {
		binary.LittleEndian.PutUint32(buf[4*i:], uint32(int32(xrows[i])))
		binary.LittleEndian.PutUint32(buf[4*(n+i):], uint32(int32(yrows[i])))
	}
	p, err := b.indexUpload(buf)
	if err != nil {
		return 0, 0, err
	}
	return p, p + cu.DevicePtr(4*n), nil
}

// indexUpload copies buf into the backend's index buffer (grown as needed)
// in compute-stream order: the previous launch that read the buffer has
// completed before the copy lands; owner thread only.
func (b *Backend) indexUpload(buf []byte) (cu.DevicePtr, error) {
	need := len(buf)
	if need > b.ring.slotBytes {
		return 0, fmt.Errorf("cuda: a %d-byte row index exceeds an upload slot of %d bytes", need, b.ring.slotBytes)
	}
	if need > b.idxBytes {
		if b.idx != 0 {
			if err := b.compute.Synchronize(); err != nil {
				return 0, err
			}
			if err := cu.MemFree(b.idx); err != nil {
				return 0, fmt.Errorf("cuda: free the row index: %w", err)
			}
			b.idx, b.idxBytes = 0, 0
		}
		size := max(need, 8<<10)
		p, err := cu.MemAlloc(int64(size))
		if err != nil {
			return 0, fmt.Errorf("cuda: allocate the row index (%d bytes): %w", size, err)
		}
		b.idx, b.idxBytes = p, size
	}
	if err := b.ring.upload(b.compute, b.idx, buf); err != nil {
		return 0, fmt.Errorf("cuda: upload the row index: %w", err)
	}
	return b.idx, nil
}

var _ backend.Waiter = (*Backend)(nil)

// Wait implements backend.Waiter: it returns once every op issued before it
// on the compute stream has completed.
func (b *Backend) Wait() error {
	return b.o.do(func() error { return b.compute.Synchronize() })
}

var _ backend.BatchedDefault = (*Backend)(nil)

// BatchedDefault implements backend.BatchedDefault: true since session
// 20. In session 16 the batched prefill was slower than token at a time at
// 32 tokens (results/prefill-h200-s16); since session 17 it is 3.5-13x
// faster from 64 tokens on at full residency (editions/prefill-v1), since
// session 18 (split-K) 1.7x at 16 (results/prefill-h200-s18), and TTFT on
// PERF-REAL-v1 went from 72 to 13.4 ms (9.9 in session 28: editions/ttft-v1). The whole CUDA
// suite passed with it on in sessions 19-20, the tests that assumed token
// at a time pinned to what they test. Raw records state which rule made
// them: from editions.RawVersionBatchedAuto a CUDA record's prefill auto
// ran batched (prefetch off), before it token at a time. The CUDA test
// binary answers false with HORIZON_TEST_BATCHED_DEFAULT=0 (batchedDefault),
// so that the suite can still run as the old default did.
func (b *Backend) BatchedDefault() bool { return batchedDefault }

// batchedDefault is BatchedDefault's answer: true in every build; only
// the CUDA tests' TestMain clears it (HORIZON_TEST_BATCHED_DEFAULT=0).
var batchedDefault = true
