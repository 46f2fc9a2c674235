//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/horizon-runmap/horizon/runtime/backend"
)

const block = 256 // threads per block of every row kernel

// xsBytes is the shared memory (bytes) a kernel needs to stage n FP32
// values in the padded layout of kernels/common.cuh (36 floats per 32):
// xs_floats(n)*4.
func xsBytes(n int) int { return (n + 31) / 32 * 36 * 4 }

// xs4Bytes is the same for the int4 kernels, which also stage one sum per
// 32-value chunk (rounded up to 4 floats): xs4_floats(n)*4.
func xs4Bytes(n int) int { return xsBytes(n) + ((n+31)/32+3)/4*4*4 }

// pickNR picks how many rows a matvec warp task holds (NR, returned as an
// index into choices): forced when want (a tuning value) is one of them,
// else the largest of the first `auto` choices that still gives every warp
// of a full GPU (16 warps per SM: two 8-warp blocks) a task. Why: NR rows
// share each activation load from shared memory (with FP32 activations an
// int4 weight byte needs 8 bytes of x), so larger NR means fewer
// instructions per weight, but NR rows per task leaves rows/NR tasks, and a
// small matrix needs every warp it can get to keep enough loads in flight.
func (b *Backend) pickNR(choices []int, auto, want, rows int) int {
	for i, nr := range choices {
		if nr == want {
			return i
		}
	}
	target := 16 * b.sms
	for i := auto - 1; i > 0; i-- {
		if rows/choices[i] >= target {
			return i
		}
	}
	return 0
}

// rowGrid is the number of blocks of fn (smem bytes of dynamic shared
// memory) for tasks warp tasks: enough for every task, at most what the GPU
// holds at once (blocks then stride over the tasks, each staging x once for
// all of them, and no block waits for a second wave). Owner thread only.
func (b *Backend) rowGrid(fn cu.Function, smem, tasks int) int {
	return max(1, min((tasks+7)/8, b.residentBlocks(fn, smem)))
}

// MatVec implements backend.Backend: W must be FP16 (UploadF16); bias FP16
// or FP32.
func (b *Backend) MatVec(dst, w, x, bias backend.Tensor) error {
	d, err := b.tensorOf("MatVec", "dst", dst, backend.F32)
	if err != nil {
		return err
	}
	wt, err := b.tensorOf("MatVec", "w", w, backend.F16)
	if err != nil {
		return err
	}
	xt, err := b.tensorOf("MatVec", "x", x, backend.F32)
	if err != nil {
		return err
	}
	rows, cols := d.n, xt.n
	if rows*cols != wt.n {
		return shapeErr("MatVec", "W has %d values, want [%d, %d]", wt.n, rows, cols)
	}
	var bp cu.DevicePtr
	bk := 0
	if bias != nil {
		bt, err := b.tensorOf("MatVec", "bias", bias, backend.F16, backend.F32)
		if err != nil {
			return err
		}
		if bt.n != rows {
			return shapeErr("MatVec", "bias has %d values, want %d", bt.n, rows)
		}
		bp, bk = bt.ptr, 1
		if bt.dt == backend.F32 {
			bk = 2
		}
	}
	return b.matvecF16("MatVec", d.ptr, wt.ptr, xt.ptr, bp, bk, rows, cols)
}

func (b *Backend) matvecF16(op string, y, w, x, bias cu.DevicePtr, biasKind, rows, cols int) error {
	if rows == 0 {
		return nil
	}
	return b.o.async(func() error {
		if err := b.matvecF16Launch(y, w, x, bias, biasKind, rows, cols, normSpec{}); err != nil {
			return fmt.Errorf("cuda: %s: launch: %w", op, err)
		}
		return nil
	})
}

// matvecF16Launch launches the FP16 matvec y = W·x (+ bias); owner thread
// only. biasKind 2 with bias = y adds the previous y (a fused residual add,
// Add's rounding). With nm.w set the kernel multiplies RMSNorm(x)·nm.w
// (the rmsnorm kernel's bits, computed while staging x).
func (b *Backend) matvecF16Launch(y, w, x, bias cu.DevicePtr, biasKind, rows, cols int, nm normSpec) error {
	return b.matvecF16LaunchGrid(0, y, w, x, bias, biasKind, rows, cols, nm)
}

// matvecF16LaunchGrid is matvecF16Launch with at most maxGrid blocks (0: no
// cap beyond rowGrid's); the rows' results do not depend on the grid.
func (b *Backend) matvecF16LaunchGrid(maxGrid int, y, w, x, bias cu.DevicePtr, biasKind, rows, cols int, nm normSpec) error {
	i := b.pickNR(f16NR[:], len(f16NR), b.tune.f16NR, rows)
	smem, v := xsBytes(cols), 0
	if smem > b.smemMax {
		if nm.w != 0 {
			return fmt.Errorf("matvec with a fused norm: %d columns do not fit shared memory", cols)
		}
		smem, v = 0, 1
	}
	fn := b.k.matvecF16[i][v]
	grid := b.rowGrid(fn, smem, (rows+f16NR[i]-1)/f16NR[i])
	if maxGrid > 0 {
		grid = min(grid, maxGrid)
	}
	return b.launch(fn, grid, block, smem, argPtr(y), argPtr(w), argPtr(x), argPtr(bias), argInt(biasKind),
		argInt(rows), argInt(cols), argPtr(nm.w), argInt(nm.kind), argF32(nm.eps))
}

// normSpec is NormSpec in kernels/common.cuh: stage RMSNorm(x)·w instead of
// x (w == 0: x as is).
type normSpec struct {
	w    cu.DevicePtr
	kind int // 1 FP16, 2 FP32
	eps  float32
}

func (b *Backend) matvecW4(op string, y, mat, x cu.DevicePtr, rows, cols, colsPadded, scalesOffset int) error {
	if rows == 0 {
		return nil
	}
	if xs4Bytes(cols) > b.smemMax && cols%32 != 0 {
		return fmt.Errorf("cuda: %s: %d columns stage %d bytes of activations, above the %d-byte shared-memory limit, and are not a multiple of 32", op, cols, xs4Bytes(cols), b.smemMax)
	}
	return b.o.async(func() error { return b.matvecW4Launch(op, y, mat, x, rows, cols, colsPadded, scalesOffset) })
}

// matvecW4Launch launches the int4 matvec; owner thread only.
func (b *Backend) matvecW4Launch(op string, y, mat, x cu.DevicePtr, rows, cols, colsPadded, scalesOffset int) error {
	smem, v := xs4Bytes(cols), 0
	if smem > b.smemMax {
		if cols%32 != 0 {
			return fmt.Errorf("cuda: %s: %d columns stage %d bytes of activations, above the %d-byte shared-memory limit, and are not a multiple of 32", op, cols, smem, b.smemMax)
		}
		smem, v = 0, 1
	}
	// r8 (one 8-warp block per SM, more registers) only when asked for.
	i := b.pickNR(w4NR[:], 3, b.tune.w4NR, rows)
	fn := b.k.matvecW4[i][v]
	grid := b.rowGrid(fn, smem, (rows+w4NR[i]-1)/w4NR[i])
	if err := b.launch(fn, grid, block, smem, argPtr(y), argPtr(mat), argPtr(x), argInt(rows), argInt(cols),
		argInt(colsPadded), argInt(scalesOffset)); err != nil {
		return fmt.Errorf("cuda: %s: launch: %w", op, err)
	}
	return nil
}

// elementwiseGrid covers n values with one thread each, capped (the kernels
// stride).
func (b *Backend) elementwiseGrid(n int) int { return max(1, min((n+block-1)/block, 8*b.sms)) }

// Embed implements backend.Backend.
func (b *Backend) Embed(dst, table backend.Tensor, tok int) error {
	d, err := b.tensorOf("Embed", "dst", dst, backend.F32)
	if err != nil {
		return err
	}
	t, err := b.tensorOf("Embed", "table", table, backend.F16, backend.F32)
	if err != nil {
		return err
	}
	n := d.n
	if n == 0 || t.n%n != 0 {
		return shapeErr("Embed", "table of %d values is not [V, %d]", t.n, n)
	}
	if tok < 0 || tok >= t.n/n {
		return fmt.Errorf("cuda: Embed: token %d outside vocabulary of %d", tok, t.n/n)
	}
	kind := 1
	if t.dt == backend.F32 {
		kind = 2
	}
	return b.launchAsync("Embed", b.k.embed, b.elementwiseGrid(n), block, 0,
		argPtr(d.ptr), argPtr(t.ptr), argInt(kind), argInt(tok), argInt(n))
}

// RMSNorm implements backend.Backend: one block per group.
func (b *Backend) RMSNorm(dst, x, w backend.Tensor, eps float32) error {
	d, err := b.tensorOf("RMSNorm", "dst", dst, backend.F32)
	if err != nil {
		return err
	}
	xt, err := b.tensorOf("RMSNorm", "x", x, backend.F32)
	if err != nil {
		return err
	}
	wt, err := b.tensorOf("RMSNorm", "w", w, backend.F16, backend.F32)
	if err != nil {
		return err
	}
	g := wt.n
	if d.n != xt.n || g == 0 || xt.n%g != 0 {
		return shapeErr("RMSNorm", "dst %d, x %d, w %d", d.n, xt.n, g)
	}
	if xt.n == 0 {
		return nil
	}
	kind := 1
	if wt.dt == backend.F32 {
		kind = 2
	}
	return b.launchAsync("RMSNorm", b.k.rmsnorm, xt.n/g, block, 0,
		argPtr(d.ptr), argPtr(xt.ptr), argPtr(wt.ptr), argInt(kind), argInt(g), argF32(eps))
}

// RoPE implements backend.Backend.
func (b *Backend) RoPE(x backend.Tensor, nHeads, headDim, pos int, theta float64) error {
	xt, err := b.tensorOf("RoPE", "x", x, backend.F32)
	if err != nil {
		return err
	}
	if nHeads*headDim != xt.n || headDim%2 != 0 || nHeads <= 0 {
		return shapeErr("RoPE", "x has %d values, want %d heads x %d", xt.n, nHeads, headDim)
	}
	if pos < 0 {
		return fmt.Errorf("cuda: RoPE: negative position %d", pos)
	}
	return b.launchAsync("RoPE", b.k.rope, b.elementwiseGrid(xt.n/2), block, 0,
		argPtr(xt.ptr), argInt(nHeads), argInt(headDim), argInt(pos), argF64(theta))
}

// KVAppend implements backend.Backend: kv_append_f32, or kv_append_f16
// (values rounded to binary16) into FP16 caches.
func (b *Backend) KVAppend(kCache, vCache, k, v backend.Tensor, pos int) error {
	kc, vc, err := b.kvCaches("KVAppend", kCache, vCache)
	if err != nil {
		return err
	}
	kt, err := b.tensorOf("KVAppend", "k", k, backend.F32)
	if err != nil {
		return err
	}
	vt, err := b.tensorOf("KVAppend", "v", v, backend.F32)
	if err != nil {
		return err
	}
	n := kt.n
	if vt.n != n || kc.n != vc.n || n == 0 || pos < 0 || (pos+1)*n > kc.n {
		return shapeErr("KVAppend", "position %d of a cache of %d values with rows of %d", pos, kc.n, n)
	}
	if kc.dt == backend.F16 {
		return b.launchAsync("KVAppend", b.k.kv[1].append, b.elementwiseGrid(n), block, 0,
			argPtr(kc.ptr), argPtr(vc.ptr), argPtr(kt.ptr), argPtr(vt.ptr), argInt(n), argInt(pos*n))
	}
	return b.launchAsync("KVAppend", b.k.kv[0].append, b.elementwiseGrid(n), block, 0,
		argPtr(kc.ptr), argPtr(vc.ptr), argPtr(kt.ptr), argPtr(vt.ptr), argInt(n), argInt(pos))
}

// attSplit is ATT_SPLIT in kernels/step.cuh: the blocks per head of
// attention_split, which every CUDA path runs; attHeadDimMax is ATT_HD_MAX.
const (
	attSplit      = 16
	attHeadDimMax = 256
)

// attPartFloats is the size of attention_split's partials for nHeads heads
// of width hd: (o[hd], max, sum) per head and split.
func attPartFloats(nHeads, hd int) int { return nHeads * attSplit * (hd + 2) }

// Attention implements backend.Backend: attention_split, heads x attSplit
// blocks over contiguous ranges of positions, merged by the last block of
// each head (attention_f32, or attention_f32_kv16 over FP16 caches).
func (b *Backend) Attention(dst, q, kCache, vCache backend.Tensor, n, nHeads, nKVHeads, headDim int) error {
	d, err := b.tensorOf("Attention", "dst", dst, backend.F32)
	if err != nil {
		return err
	}
	qt, err := b.tensorOf("Attention", "q", q, backend.F32)
	if err != nil {
		return err
	}
	kc, vc, err := b.kvCaches("Attention", kCache, vCache)
	if err != nil {
		return err
	}
	kvDim := nKVHeads * headDim
	if qt.n != nHeads*headDim || d.n != qt.n || nKVHeads <= 0 || nHeads%nKVHeads != 0 || n <= 0 || n*kvDim > kc.n || vc.n != kc.n {
		return shapeErr("Attention", "q %d, dst %d, %d heads / %d kv heads x %d over %d positions of a %d-value cache",
			qt.n, d.n, nHeads, nKVHeads, headDim, n, kc.n)
	}
	if err := attentionHeadDimOK(headDim); err != nil {
		return fmt.Errorf("cuda: Attention: %w", err)
	}
	if (qt.ptr|kc.ptr|vc.ptr)%16 != 0 {
		return fmt.Errorf("cuda: Attention: q, K and V must start on 16-byte boundaries (the kernel loads float4s)")
	}
	part := attPartFloats(nHeads, headDim)
	return b.o.async(func() error {
		// The tickets live apart from the partials: a ticket must read 0
		// before its head's first block, whatever shape used the
		// scratch before.
		if err := b.scratch(&b.attPart, part); err != nil {
			return fmt.Errorf("cuda: Attention: scratch: %w", err)
		}
		if err := b.scratch(&b.attCnt, nHeads); err != nil {
			return fmt.Errorf("cuda: Attention: tickets: %w", err)
		}
		if err := b.launch(b.k.kv[kvIndex(kc.dt)].attention, nHeads*attSplit, block, 0, argPtr(d.ptr), argPtr(b.attPart.ptr), argPtr(b.attCnt.ptr),
			argPtr(qt.ptr), argPtr(kc.ptr), argPtr(vc.ptr), argInt(n), argInt(nHeads), argInt(nKVHeads), argInt(headDim)); err != nil {
			return fmt.Errorf("cuda: Attention: launch: %w", err)
		}
		return nil
	})
}

// attentionHeadDimOK says whether attention_split takes heads of width hd:
// float4 lanes (hd % 4 == 0) up to ATT_HD_MAX.
func attentionHeadDimOK(hd int) error {
	if hd%4 != 0 || hd > attHeadDimMax {
		return fmt.Errorf("head dim %d: the attention kernel takes multiples of 4 up to %d", hd, attHeadDimMax)
	}
	return nil
}

// SiLUMul implements backend.Backend.
func (b *Backend) SiLUMul(dst, gate, up backend.Tensor) error {
	d, err := b.tensorOf("SiLUMul", "dst", dst, backend.F32)
	if err != nil {
		return err
	}
	g, err := b.tensorOf("SiLUMul", "gate", gate, backend.F32)
	if err != nil {
		return err
	}
	u, err := b.tensorOf("SiLUMul", "up", up, backend.F32)
	if err != nil {
		return err
	}
	if d.n != g.n || g.n != u.n {
		return shapeErr("SiLUMul", "dst %d, gate %d, up %d", d.n, g.n, u.n)
	}
	return b.launchAsync("SiLUMul", b.k.siluMul, b.elementwiseGrid(d.n), block, 0,
		argPtr(d.ptr), argPtr(g.ptr), argPtr(u.ptr), argInt(d.n))
}

// Add implements backend.Backend.
func (b *Backend) Add(dst, x, y backend.Tensor) error {
	d, err := b.tensorOf("Add", "dst", dst, backend.F32)
	if err != nil {
		return err
	}
	xt, err := b.tensorOf("Add", "a", x, backend.F32)
	if err != nil {
		return err
	}
	yt, err := b.tensorOf("Add", "b", y, backend.F32)
	if err != nil {
		return err
	}
	if d.n != xt.n || xt.n != yt.n {
		return shapeErr("Add", "dst %d, a %d, b %d", d.n, xt.n, yt.n)
	}
	return b.launchAsync("Add", b.k.add, b.elementwiseGrid(d.n), block, 0,
		argPtr(d.ptr), argPtr(xt.ptr), argPtr(yt.ptr), argInt(d.n))
}

// AddScaled implements backend.Backend.
func (b *Backend) AddScaled(dst, x backend.Tensor, alpha float32) error {
	d, err := b.tensorOf("AddScaled", "dst", dst, backend.F32)
	if err != nil {
		return err
	}
	xt, err := b.tensorOf("AddScaled", "x", x, backend.F32)
	if err != nil {
		return err
	}
	if d.n != xt.n {
		return shapeErr("AddScaled", "dst %d, x %d", d.n, xt.n)
	}
	return b.launchAsync("AddScaled", b.k.addScaled, b.elementwiseGrid(d.n), block, 0,
		argPtr(d.ptr), argPtr(xt.ptr), argF32(alpha), argInt(d.n))
}

// AddGated implements backend.Backend.
func (b *Backend) AddGated(dst, x, g backend.Tensor) error {
	d, err := b.tensorOf("AddGated", "dst", dst, backend.F32)
	if err != nil {
		return err
	}
	xt, err := b.tensorOf("AddGated", "x", x, backend.F32)
	if err != nil {
		return err
	}
	gt, err := b.tensorOf("AddGated", "g", g, backend.F32)
	if err != nil {
		return err
	}
	if gt.n != 1 {
		return shapeErr("AddGated", "gate has %d values, want 1", gt.n)
	}
	if d.n != xt.n {
		return shapeErr("AddGated", "dst %d, x %d", d.n, xt.n)
	}
	return b.launchAsync("AddGated", b.k.addGated, b.elementwiseGrid(d.n), block, 0,
		argPtr(d.ptr), argPtr(xt.ptr), argPtr(gt.ptr), argInt(d.n))
}

// TopK implements backend.Backend: softmax and selection on the device, the
// renormalisation on the host in the CPU reference's order.
func (b *Backend) TopK(logits backend.Tensor, k int, norm bool) ([]int, []float32, error) {
	lt, err := b.tensorOf("TopK", "logits", logits, backend.F32)
	if err != nil {
		return nil, nil, err
	}
	if k <= 0 || k > lt.n {
		return nil, nil, shapeErr("TopK", "k %d over %d logits", k, lt.n)
	}
	if k > maxGroup {
		return nil, nil, fmt.Errorf("cuda: TopK: k %d above %d", k, maxGroup)
	}
	smem := lt.n*4 + (lt.n+3)/4*4
	if smem > b.smemMax {
		return nil, nil, fmt.Errorf("cuda: TopK: %d logits exceed shared memory", lt.n)
	}
	ids := make([]int, k)
	ws := make([]float32, k)
	err = b.o.do(func() error {
		res := b.resultBase()
		if err := b.launch(b.k.topk, 1, block, smem, argPtr(lt.ptr), argInt(lt.n), argInt(k),
			argPtr(res+smallIDs), argPtr(res+smallW)); err != nil {
			return err
		}
		host, err := b.readResults(smallArgmax)
		if err != nil {
			return err
		}
		id32 := unsafe.Slice((*int32)(unsafe.Pointer(&host[smallIDs])), k)
		w32 := unsafe.Slice((*float32)(unsafe.Pointer(&host[smallW])), k)
		for i := range k {
			ids[i], ws[i] = int(id32[i]), w32[i]
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("cuda: TopK: %w", err)
	}
	if norm {
		renormalise(ws)
	}
	return ids, ws, nil
}

// renormalise divides a routed group's weights by their sum, added in
// order: the CPU reference's (Backend.TopK) renormalisation.
func renormalise(ws []float32) {
	var s float32
	for _, w := range ws {
		s += w
	}
	for i := range ws {
		ws[i] /= s
	}
}

// Argmax implements backend.Backend.
func (b *Backend) Argmax(logits backend.Tensor, masked []int) (int, error) {
	lt, err := b.tensorOf("Argmax", "logits", logits, backend.F32)
	if err != nil {
		return 0, err
	}
	for _, m := range masked {
		if m < math.MinInt32 || m > math.MaxInt32 {
			return 0, fmt.Errorf("cuda: Argmax: masked id %d out of range", m)
		}
	}
	mask := append([]int(nil), masked...)
	var best int
	err = b.o.do(func() error {
		if err := b.setMask(mask); err != nil {
			return err
		}
		if err := b.launch(b.k.argmax, 1, 1024, 0, argPtr(lt.ptr), argInt(lt.n), argPtr(b.masked),
			argInt(len(mask)), argPtr(b.resultBase()+smallArgmax)); err != nil {
			return err
		}
		host, err := b.readResults(smallArgmax + 4)
		if err != nil {
			return err
		}
		best = int(*(*int32)(unsafe.Pointer(&host[smallArgmax])))
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("cuda: Argmax: %w", err)
	}
	if best < 0 {
		return 0, fmt.Errorf("cuda: Argmax: every one of %d logits is masked or NaN", lt.n)
	}
	return best, nil
}

// resultBase is where TopK and Argmax kernels write their results: the
// mapped pinned buffer when it works (no copy back), else b.small. Owner
// thread only.
func (b *Backend) resultBase() cu.DevicePtr {
	if b.results.ok && !b.tune.noMapped {
		return b.results.dev
	}
	return b.small
}

// readResults waits for the compute stream and returns the first n bytes of
// the results the last TopK or Argmax kernel wrote (see resultBase). Owner
// thread only.
func (b *Backend) readResults(n int) ([]byte, error) {
	if b.results.ok && !b.tune.noMapped {
		if err := b.compute.Synchronize(); err != nil {
			return nil, err
		}
		return b.results.bytes()[:n], nil
	}
	return b.read(b.small, n)
}

// setMask makes b.masked hold ids (uploaded only when they changed, which
// for EOS suppression is once); owner thread only.
func (b *Backend) setMask(ids []int) error {
	if equalInts(ids, b.lastMask) && (b.masked != 0 || len(ids) == 0) {
		return nil
	}
	if len(ids) > b.maskedN || b.masked == 0 {
		if b.masked != 0 {
			if err := cu.MemFree(b.masked); err != nil {
				return err
			}
			b.masked, b.maskedN = 0, 0
		}
		n := max(64, len(ids))
		p, err := cu.MemAlloc(int64(4 * n))
		if err != nil {
			return err
		}
		b.masked, b.maskedN = p, n
	}
	b.lastMask = append(b.lastMask[:0], ids...)
	if len(ids) == 0 {
		return nil
	}
	buf := make([]byte, 4*len(ids))
	for i, id := range ids {
		*(*int32)(unsafe.Pointer(&buf[4*i])) = int32(id)
	}
	return b.ring.upload(b.compute, b.masked, buf)
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// opPDL says whether kernels launched op by op (outside a capture) are
// programmatic dependent launches: inside a batched prefill, unless
// tuning.noPrefillPDL; owner thread.
func (b *Backend) opPDL() bool { return b.inPrefill && !b.tune.noPrefillPDL }

// BeginPrefill implements backend.PrefillScope: the batched prefill's
// kernels are launched with programmatic dependent launch (opPDL).
func (b *Backend) BeginPrefill() error {
	return b.o.do(func() error {
		b.inPrefill = true
		if !b.capturing {
			b.pdl, b.pdlPrev = b.opPDL(), false
		}
		return nil
	})
}

// EndPrefill implements backend.PrefillScope: op-by-op launches are plain
// again.
func (b *Backend) EndPrefill() error {
	return b.o.do(func() error {
		b.inPrefill = false
		if !b.capturing {
			b.pdl, b.pdlPrev = false, false
		}
		return nil
	})
}

// setTuning sets the backend's tuning and writes what of it the kernels
// read from device memory (hz_wait_prefetch); owner thread only.
func (b *Backend) setTuning(t tuning) error {
	b.tune = t
	b.routeOff.Store(t.noRouteDevice || t.noMatmulTC || t.tcNoPreSplit)
	b.attnInRowsOff.Store(t.noAttnInRows)
	if !b.capturing {
		b.pdl, b.pdlPrev = b.opPDL(), false
	}
	if b.waitPF == 0 {
		if t.waitPrefetch != 0 {
			return fmt.Errorf("cuda: tuning.waitPrefetch %d: %w", t.waitPrefetch, b.waitPFErr)
		}
		return nil
	}
	v := t.waitPrefetch
	if err := cu.MemcpyHtoD(b.waitPF, unsafe.Pointer(&v), 4); err != nil {
		return fmt.Errorf("cuda: set hz_wait_prefetch: %w", err)
	}
	return nil
}
