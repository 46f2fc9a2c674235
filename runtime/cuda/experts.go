//go:build cuda

package cuda

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// The routed-group row table: the grouped kernels find expert k's record at
// the device address recs[k] and its routing weight at wts[k]. The table is
// passed by value as the kernels' last parameter (struct GroupTable in
// kernels/experts_grouped.cu, read from the constant bank), so a grouped op
// is one launch with nothing else on the stream (no table upload):
//
//	+0            uint64  recs[maxGroup]
//	+tableWeights float32 wts[maxGroup]
const (
	tableWeights = 8 * maxGroup
	tableBytes   = tableWeights + 4*maxGroup
)

// groupTable is an encoded row table, ready to be a kernel parameter.
type groupTable [tableBytes]byte

// ExpertMatVec implements backend.Backend.
func (b *Backend) ExpertMatVec(dst, rec backend.Tensor, m qpack.MatrixLayout, scheme qpack.Scheme, x backend.Tensor) error {
	d, err := b.tensorOf("ExpertMatVec", "dst", dst, backend.F32)
	if err != nil {
		return err
	}
	r, err := b.tensorOf("ExpertMatVec", "rec", rec, backend.Bytes)
	if err != nil {
		return err
	}
	xt, err := b.tensorOf("ExpertMatVec", "x", x, backend.F32)
	if err != nil {
		return err
	}
	if d.n != m.Rows || xt.n != m.Cols || m.Offset < 0 || m.Offset+m.Bytes > r.n {
		return shapeErr("ExpertMatVec", "dst %d, x %d for a [%d, %d] matrix at [%d, %d) of a %d-byte record",
			d.n, xt.n, m.Rows, m.Cols, m.Offset, m.Offset+m.Bytes, r.n)
	}
	mat := r.ptr + cu.DevicePtr(m.Offset)
	switch scheme {
	case qpack.SchemeInt4:
		if err := checkInt4Layout(m); err != nil {
			return fmt.Errorf("cuda: ExpertMatVec: %w", err)
		}
		return b.matvecW4("ExpertMatVec", d.ptr, mat, xt.ptr, m.Rows, m.Cols, m.ColsPadded, m.ScalesOffset)
	case qpack.SchemeFP16:
		if m.Offset%16 != 0 {
			return fmt.Errorf("cuda: ExpertMatVec: fp16 matrix at offset %d is not 16-byte aligned", m.Offset)
		}
		return b.matvecF16("ExpertMatVec", d.ptr, mat, xt.ptr, 0, 0, m.Rows, m.Cols)
	}
	return fmt.Errorf("cuda: ExpertMatVec: unknown scheme %q", scheme)
}

// checkInt4Layout checks what the int4 kernels assume of a matrix: 16-byte
// aligned rows of whole blocks and the scales right after the rows.
func checkInt4Layout(m qpack.MatrixLayout) error {
	if m.Offset%16 != 0 || m.ColsPadded%qpack.BlockSize != 0 || m.ColsPadded < m.Cols ||
		m.ScalesOffset != m.Rows*m.ColsPadded/2 {
		return fmt.Errorf("int4 matrix layout %+v is not qpack-int4-b256-v1 with 16-byte aligned rows", m)
	}
	return nil
}

// group validates a routed group's rows and returns their device addresses.
func (b *Backend) group(op string, rows []backend.Tensor, l qpack.RecordLayout) ([]uint64, error) {
	if len(rows) == 0 || len(rows) > maxGroup {
		return nil, fmt.Errorf("cuda: %s: %d experts in a group, want 1..%d", op, len(rows), maxGroup)
	}
	switch l.Scheme {
	case qpack.SchemeInt4:
		for _, m := range l.Matrices() {
			if err := checkInt4Layout(m); err != nil {
				return nil, fmt.Errorf("cuda: %s: %w", op, err)
			}
		}
	case qpack.SchemeFP16:
		for _, m := range l.Matrices() {
			if m.Offset%16 != 0 {
				return nil, fmt.Errorf("cuda: %s: fp16 matrix at offset %d is not 16-byte aligned", op, m.Offset)
			}
		}
	default:
		return nil, fmt.Errorf("cuda: %s: unknown scheme %q", op, l.Scheme)
	}
	ptrs := make([]uint64, len(rows))
	for k, r := range rows {
		t, err := b.tensorOf(op, fmt.Sprintf("row %d", k), r, backend.Bytes)
		if err != nil {
			return nil, err
		}
		if t.n < l.Size {
			return nil, shapeErr(op, "row %d has %d bytes, the record needs %d", k, t.n, l.Size)
		}
		ptrs[k] = uint64(t.ptr)
	}
	return ptrs, nil
}

// encodeTable encodes a row table and its weights (nil for gate/up).
func encodeTable(ptrs []uint64, weights []float32) *groupTable {
	t := new(groupTable)
	for k, p := range ptrs {
		*(*uint64)(unsafe.Pointer(&t[8*k])) = p
	}
	for k, w := range weights {
		*(*float32)(unsafe.Pointer(&t[tableWeights+4*k])) = w
	}
	return t
}

// stagedBytes is the shared memory one staged activation vector of n values
// takes in the grouped kernels of scheme s.
func stagedBytes(s qpack.Scheme, n int) int {
	if s == qpack.SchemeInt4 {
		return xs4Bytes(n)
	}
	return xsBytes(n)
}

func schemeIndex(s qpack.Scheme) int {
	if s == qpack.SchemeFP16 {
		return 1
	}
	return 0
}

// rowTable is where a grouped kernel finds its routed group: passed by
// value (blob), or in device memory at dev (the _t kernels of captured
// steps) from entry k0 on; the _t gate/up kernel can also normalise its
// input while staging it (norm).
type rowTable struct {
	blob *groupTable
	dev  cu.DevicePtr
	k0   int
	norm normSpec
	// late: the table is written by the kernel just ahead, so the _t down
	// kernel must wait before it reads it (no early loads).
	late bool
}

// gateUpLaunch enqueues experts_gateup; owner thread only. Blocks stride
// over the A*ceil(F/NRP) warp tasks; the grid is what the GPU holds at once.
func (b *Backend) gateUpLaunch(act, x cu.DevicePtr, a int, l qpack.RecordLayout, tbl *groupTable) error {
	return b.gateUpLaunchFrom(act, x, a, l, rowTable{blob: tbl})
}

func (b *Backend) gateUpLaunchFrom(act, x cu.DevicePtr, a int, l qpack.RecordLayout, rt rowTable) error {
	F, D := l.Gate.Rows, l.Gate.Cols
	if ui, smem, ok := b.tcDecodeShape(rt, a, l, false); ok {
		fn := b.k.gateupTC[ui]
		b.tcdLaunches++
		return b.launch(fn, b.rowGrid(fn, smem, a*((F+7)/8)), block, smem, argPtr(act), argPtr(x), argInt(a), argInt(F), argInt(D),
			argInt(l.Gate.Offset), argInt(l.Up.Offset), argInt(l.Gate.ColsPadded), argInt(l.Gate.ScalesOffset),
			argPtr(rt.dev), argInt(rt.k0), argPtr(rt.norm.w), argInt(rt.norm.kind), argF32(rt.norm.eps))
	}
	smem, v := stagedBytes(l.Scheme, D), 0
	if smem > b.smemMax {
		smem, v = 0, 1
	}
	pi := b.gateUpIndex()
	nrp := gateUpNRP[pi]
	fn := b.k.gateup[schemeIndex(l.Scheme)][pi][v]
	if rt.blob == nil {
		fn = b.k.gateupT[schemeIndex(l.Scheme)][pi][v]
	}
	grid := b.rowGrid(fn, smem, a*((F+nrp-1)/nrp))
	args := []uint64{argPtr(act), argPtr(x), argInt(a), argInt(F), argInt(D),
		argInt(l.Gate.Offset), argInt(l.Up.Offset), argInt(l.Gate.ColsPadded), argInt(l.Gate.ScalesOffset)}
	if rt.blob != nil {
		return b.launchBlob(fn, grid, block, smem, unsafe.Pointer(rt.blob), args...)
	}
	if rt.norm.w != 0 && v != 0 {
		return fmt.Errorf("gate/up with a fused norm: %d columns do not fit shared memory", D)
	}
	return b.launch(fn, grid, block, smem, append(args, argPtr(rt.dev), argInt(rt.k0),
		argPtr(rt.norm.w), argInt(rt.norm.kind), argF32(rt.norm.eps))...)
}

// gateUpIndex is the grouped gate/up variant (index into gateUpNRP): NRP 2
// unless tuning.gateUpNRP asks for 4.
func (b *Backend) gateUpIndex() int {
	if b.tune.gateUpNRP == gateUpNRP[1] {
		return 1
	}
	return 0
}

// downShape picks the down kernel's variant (index into downVariants) and
// its tile of output rows: a block computes all A experts for R rows, so the
// grid is ceil(D/R) blocks. R is the smallest multiple of NR that makes the
// grid one wave of resident blocks and gives the block's 8 warps at least
// one (expert, NR rows) item each. Rows whose dot fits one 32-chunk segment
// (int4: F <= 1024) take _r8 (8 rows x one 16-byte chunk per lane, 4 KB per
// warp-step; each warp's items are all in flight from the start), wider
// ones _r4 (4 rows x 2 chunks).
func (b *Backend) downShape(a int, l qpack.RecordLayout) (vi, R, smem, v int) {
	D, F := l.Down.Rows, l.Down.Cols
	nch := (F + 31) / 32
	if l.Scheme == qpack.SchemeFP16 {
		nch = F / 8
	}
	vi = 1
	if nch > 32 {
		vi = 0
	}
	if t := b.tune.downVariant; t > 0 && t <= len(downVariants) {
		vi = t - 1
	}
	nr := downVariants[vi].nr
	stage, v := a*stagedBytes(l.Scheme, F), 0
	if !b.downStaged(a, l) || (b.tune.downGlobal && (l.Scheme != qpack.SchemeInt4 || F%32 == 0)) {
		stage, v = 0, 1
	}
	groups := (D + nr - 1) / nr
	if b.tune.downTile > 0 {
		R = (b.tune.downTile + nr - 1) / nr * nr
	} else {
		fn := b.k.down[schemeIndex(l.Scheme)][vi][v]
		resident := b.residentBlocks(fn, stage+a*4*2*nr)
		per := max((groups+resident-1)/resident, (8+a-1)/a)
		R = per * nr
	}
	R = min(R, groups*nr, downMaxTile/nr*nr)
	return vi, R, stage + a*4*R, v
}

// tcDecodeVariants are experts_tc.cu's kernel pairs (tuning.tcDecode is 1 +
// an index): tc4 and tc8 keep 4 or 8 chunks a lane a step in registers,
// tca4 streams 4 a step through a ring of tcqSteps steps a warp in shared
// memory by cp.async. tcDecodeTile is the down kernels' tile of output rows.
var tcDecodeVariants = [3]string{"tc4", "tc8", "tca4"}

// tcqRing is the tca4 kernels' ring: 8 warps x TCQ_S (4) steps x
// tcq_stage_bytes<4>() (4 chunks x 2 rows x 32 lanes x 20 bytes).
const tcqRing = 8 * 4 * 4 * 2 * 32 * 20

const tcDecodeTile = 16

// tcDecodeShape is the kernel-choice predicate of the decode experts on the
// tensor cores (tuning.tcDecode, experts_tc.cu): int4 records, a device row
// table (captured steps), not inside the persistent kernel's recording, and
// the activations' split (and, for gate/up, the staged vector) within shared
// memory. It returns the step index and the dynamic shared memory.
func (b *Backend) tcDecodeShape(rt rowTable, a int, l qpack.RecordLayout, down bool) (int, int, bool) {
	ui := b.tune.tcDecode - 1
	if ui < 0 || ui >= len(tcDecodeVariants) || rt.blob != nil || b.rec != nil || l.Scheme != qpack.SchemeInt4 {
		return 0, 0, false
	}
	smem := xsBytes(l.Gate.Cols) + tcdVecBytes(l.Gate.Cols)
	if down {
		smem = a*tcdVecBytes(l.Down.Cols) + a*4*tcDecodeTile
	}
	if tcDecodeVariants[ui] == "tca4" {
		smem = (smem+15)/16*16 + tcqRing
	}
	return ui, smem, smem <= b.smemMax
}

// tcdVecBytes is experts_tc.cu's tcd_vec_bytes: the shared memory of one
// split activation vector of n values.
func tcdVecBytes(n int) int {
	nch := (n + 31) / 32
	return nch*128 + (nch*4+15)/16*16
}

// downMaxTile bounds the down kernel's tile (rows per block), and with it
// the p[A][R] partial results it keeps in shared memory.
const downMaxTile = 64

// downStaged reports whether the down kernel stages all a activation
// vectors in shared memory (variant _s), with room for p[a][downMaxTile];
// otherwise it reads them from global memory (_g).
func (b *Backend) downStaged(a int, l qpack.RecordLayout) bool {
	return a*stagedBytes(l.Scheme, l.Down.Cols)+a*4*downMaxTile <= b.smemMax
}

// downLaunch enqueues experts_down; owner thread only.
func (b *Backend) downLaunch(out, act cu.DevicePtr, a int, l qpack.RecordLayout, tbl *groupTable) error {
	return b.downLaunchFrom(out, act, a, l, rowTable{blob: tbl}, 0, false)
}

// downLaunchFrom is downLaunch for either table source. With a device table
// (the _t kernels) resid, when not 0, is added to each output row
// (out[d] = resid[d] + combine, Add's rounding), and accumulate starts the
// combine from out's current value instead of 0 (AddScaled onto it).
func (b *Backend) downLaunchFrom(out, act cu.DevicePtr, a int, l qpack.RecordLayout, rt rowTable, resid cu.DevicePtr, accumulate bool) error {
	D, F := l.Down.Rows, l.Down.Cols
	if ui, smem, ok := b.tcDecodeShape(rt, a, l, true); ok {
		acc, early := 0, 0
		b.tcdLaunches++
		if accumulate {
			acc = 1
		}
		if !b.tune.downLate && b.rec == nil && !rt.late {
			early = 1
		}
		return b.launch(b.k.downTC[ui], (D+tcDecodeTile-1)/tcDecodeTile, block, smem, argPtr(out), argPtr(act), argInt(a), argInt(D),
			argInt(F), argInt(l.Down.Offset), argInt(l.Down.ColsPadded), argInt(l.Down.ScalesOffset), argInt(tcDecodeTile),
			argPtr(rt.dev), argInt(rt.k0), argPtr(resid), argInt(acc), argInt(early))
	}
	vi, R, smem, v := b.downShape(a, l)
	args := []uint64{argPtr(out), argPtr(act), argInt(a), argInt(D), argInt(F),
		argInt(l.Down.Offset), argInt(l.Down.ColsPadded), argInt(l.Down.ScalesOffset), argInt(R)}
	if rt.blob != nil {
		fn := b.k.down[schemeIndex(l.Scheme)][vi][v]
		return b.launchBlob(fn, (D+R-1)/R, block, smem, unsafe.Pointer(rt.blob), args...)
	}
	acc := 0
	if accumulate {
		acc = 1
	}
	early := 0
	if !b.tune.downLate && b.rec == nil && !rt.late {
		early = 1 // the first weight loads before grid_dep_enter (experts_grouped.cu)
	}
	fn := b.k.downT[schemeIndex(l.Scheme)][vi][v]
	return b.launch(fn, (D+R-1)/R, block, smem, append(args, argPtr(rt.dev), argInt(rt.k0), argPtr(resid), argInt(acc), argInt(early))...)
}

// checkGlobalFallback rejects shapes whose activations fit neither shared
// memory nor the int4 global-memory variant (which reads whole 32-value
// chunks of each act_k).
func (b *Backend) checkGlobalFallback(op string, l qpack.RecordLayout, a int) error {
	if l.Scheme != qpack.SchemeInt4 {
		return nil
	}
	if xs4Bytes(l.Gate.Cols) > b.smemMax && l.Gate.Cols%32 != 0 {
		return fmt.Errorf("cuda: %s: hidden size %d too wide for shared memory and not a multiple of 32", op, l.Gate.Cols)
	}
	if !b.downStaged(a, l) && l.Down.Cols%32 != 0 {
		return fmt.Errorf("cuda: %s: %d experts of FFN width %d too wide for shared memory and not a multiple of 32", op, a, l.Down.Cols)
	}
	return nil
}

// ExpertGateUp implements backend.Backend: one launch for the whole group.
func (b *Backend) ExpertGateUp(act backend.Tensor, rows []backend.Tensor, l qpack.RecordLayout, x backend.Tensor) error {
	at, err := b.tensorOf("ExpertGateUp", "act", act, backend.F32)
	if err != nil {
		return err
	}
	xt, err := b.tensorOf("ExpertGateUp", "x", x, backend.F32)
	if err != nil {
		return err
	}
	ptrs, err := b.group("ExpertGateUp", rows, l)
	if err != nil {
		return err
	}
	F := l.Gate.Rows
	if at.n != len(rows)*F || xt.n != l.Gate.Cols {
		return shapeErr("ExpertGateUp", "act %d for %d experts of F=%d, x %d want %d", at.n, len(rows), F, xt.n, l.Gate.Cols)
	}
	if err := b.checkGlobalFallback("ExpertGateUp", l, len(rows)); err != nil {
		return err
	}
	tbl := encodeTable(ptrs, nil)
	return b.o.async(func() error {
		if err := b.gateUpLaunch(at.ptr, xt.ptr, len(ptrs), l, tbl); err != nil {
			return fmt.Errorf("cuda: ExpertGateUp: launch: %w", err)
		}
		return nil
	})
}

// ExpertDownCombine implements backend.Backend: one launch for the whole
// group, experts combined in k order.
func (b *Backend) ExpertDownCombine(out backend.Tensor, rows []backend.Tensor, l qpack.RecordLayout, act backend.Tensor, weights []float32) error {
	ot, err := b.tensorOf("ExpertDownCombine", "out", out, backend.F32)
	if err != nil {
		return err
	}
	at, err := b.tensorOf("ExpertDownCombine", "act", act, backend.F32)
	if err != nil {
		return err
	}
	ptrs, err := b.group("ExpertDownCombine", rows, l)
	if err != nil {
		return err
	}
	F, D := l.Down.Cols, l.Down.Rows
	if len(weights) != len(rows) || at.n != len(rows)*F || ot.n != D {
		return shapeErr("ExpertDownCombine", "%d rows, %d weights, act %d, out %d (F=%d, D=%d)", len(rows), len(weights), at.n, ot.n, F, D)
	}
	if err := b.checkGlobalFallback("ExpertDownCombine", l, len(rows)); err != nil {
		return err
	}
	tbl := encodeTable(ptrs, weights)
	return b.o.async(func() error {
		if err := b.downLaunch(ot.ptr, at.ptr, len(ptrs), l, tbl); err != nil {
			return fmt.Errorf("cuda: ExpertDownCombine: launch: %w", err)
		}
		return nil
	})
}

// FusedExperts implements backend.Backend: the gate/up and down kernels back
// to back, sharing one encoded row table, through a backend-owned activation
// scratch (the same kernels as grouped-v1, hence the same bits).
func (b *Backend) FusedExperts(out backend.Tensor, rows []backend.Tensor, l qpack.RecordLayout, x backend.Tensor, weights []float32) error {
	ot, err := b.tensorOf("FusedExperts", "out", out, backend.F32)
	if err != nil {
		return err
	}
	xt, err := b.tensorOf("FusedExperts", "x", x, backend.F32)
	if err != nil {
		return err
	}
	ptrs, err := b.group("FusedExperts", rows, l)
	if err != nil {
		return err
	}
	F, D := l.Gate.Rows, l.Down.Rows
	if len(weights) != len(rows) || xt.n != l.Gate.Cols || ot.n != D || l.Down.Cols != F {
		return shapeErr("FusedExperts", "%d rows, %d weights, x %d, out %d (F=%d, D=%d)", len(rows), len(weights), xt.n, ot.n, F, D)
	}
	if err := b.checkGlobalFallback("FusedExperts", l, len(rows)); err != nil {
		return err
	}
	tbl := encodeTable(ptrs, weights)
	need := len(rows) * F
	return b.o.async(func() error {
		if err := b.scratch(&b.fusedAct, need); err != nil {
			return fmt.Errorf("cuda: FusedExperts: scratch: %w", err)
		}
		if err := b.gateUpLaunch(b.fusedAct.ptr, xt.ptr, len(ptrs), l, tbl); err != nil {
			return fmt.Errorf("cuda: FusedExperts: gate/up launch: %w", err)
		}
		if err := b.downLaunch(ot.ptr, b.fusedAct.ptr, len(ptrs), l, tbl); err != nil {
			return fmt.Errorf("cuda: FusedExperts: down launch: %w", err)
		}
		return nil
	})
}

// experts_moe_int4_t's diagnostic flags (tuning.moeFlags; MOE_* in
// kernels/experts_fused.cu).
const (
	moeNoPrefetch = 1
	moeNoDown     = 2
	moeNoBarrier  = 4
)

// moeDownNR is the down rows per warp task of the fused routed-experts
// kernel (experts_moe_int4_t runs the down body of _r4c1: 4 rows x 1 chunk
// per lane, which fits the 128 registers of two blocks per SM with the
// gate/up body).
const moeDownNR = 4

// moeShape is the launch of experts_moe_int4_t for a group of a experts:
// the grid (at most one wave of resident blocks: the kernel's grid barrier
// needs them all running at once), the down tile R (rows per block, as
// downShape picks it for that wave), ndown = ceil(D/R) blocks with a tile,
// and the dynamic shared memory (gate/up stages x, then down stages the a
// activation vectors and p[a][R] in the same space). ok is false when the
// kernel does not apply: not int4, or the staging does not fit shared
// memory.
func (b *Backend) moeShape(a int, l qpack.RecordLayout) (grid, R, ndown, smem int, ok bool) {
	if l.Scheme != qpack.SchemeInt4 || a < 1 || a > maxGroup {
		return 0, 0, 0, 0, false
	}
	D, F := l.Down.Rows, l.Down.Cols
	smem = max(xs4Bytes(l.Gate.Cols), a*xs4Bytes(F)+a*4*downMaxTile)
	if smem > b.smemMax {
		return 0, 0, 0, 0, false
	}
	resident := b.residentBlocks(b.k.moeInt4T, smem)
	groups := (D + moeDownNR - 1) / moeDownNR
	per := max((groups+resident-1)/resident, (8+a-1)/a)
	R = min(per*moeDownNR, groups*moeDownNR, downMaxTile/moeDownNR*moeDownNR)
	ndown = (D + R - 1) / R
	if ndown > resident {
		return 0, 0, 0, 0, false
	}
	tasks := a * ((l.Gate.Rows + gateUpNRP[0] - 1) / gateUpNRP[0])
	grid = min(resident, max((tasks+7)/8, ndown))
	return grid, R, ndown, smem, true
}

// moeLaunch enqueues experts_moe_int4_t for the group at rt.dev (entries
// 0..a-1, gate/up staging rt.norm's RMSNorm of x): act = SiLU(G·x)*(U·x),
// then out[d] = resid[d] + combine (resid 0: the combine alone). bar is the
// launch's barrier counter (one uint32, zero before the first launch; the
// kernel leaves it ready for the next). Owner thread only.
func (b *Backend) moeLaunch(out, act, x cu.DevicePtr, a int, l qpack.RecordLayout, rt rowTable, resid, bar cu.DevicePtr) error {
	grid, R, ndown, smem, ok := b.moeShape(a, l)
	if !ok {
		return fmt.Errorf("cuda: fused routed experts: %d experts of a %s record do not fit the fused kernel", a, l.Scheme)
	}
	if rt.blob != nil || rt.k0 != 0 {
		return fmt.Errorf("cuda: fused routed experts: the row table must be in device memory from entry 0")
	}
	b.moeLaunches++
	return b.launch(b.k.moeInt4T, grid, block, smem, argPtr(out), argPtr(act), argPtr(x), argInt(a),
		argInt(l.Gate.Rows), argInt(l.Gate.Cols), argInt(l.Gate.Offset), argInt(l.Up.Offset),
		argInt(l.Gate.ColsPadded), argInt(l.Gate.ScalesOffset), argInt(l.Down.Offset), argInt(l.Down.ColsPadded),
		argInt(l.Down.ScalesOffset), argInt(R), argInt(ndown), argPtr(rt.dev), argPtr(rt.norm.w), argInt(rt.norm.kind),
		argF32(rt.norm.eps), argPtr(resid), argPtr(bar), argInt(b.tune.moeFlags))
}
