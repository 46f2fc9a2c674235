//go:build cuda

package cuda

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/horizon-runmap/horizon/runtime/half"
)

// chainShape is one op of a test or benchmark program: rows x cols, reading
// the first cols outputs of op src (-1: the program's input x0), after op
// dep; with spin > 0 a latency op (no weights, one row) of spin ns.
type chainShape struct {
	rows, cols, src, dep, spin int
}

// mv is a matvec reading op src and depending on it; latOp a latency op of
// ns nanoseconds after op dep.
func mv(rows, cols, src int) chainShape { return chainShape{rows, cols, src, src, 0} }
func latOp(dep, ns int) chainShape      { return chainShape{1, 8, -1, dep, ns} }

// buildChain allocates a program's weights (one buffer, N(0, 1/cols) FP16
// values when host is true, else random FP16-safe bits), its input and
// one output an op, and returns the ops.
type chainBuilt struct {
	ops     []chainOp
	shapes  []chainShape
	w       *Tensor
	wHost   []uint16 // nil unless host
	x0      *Tensor
	ys      []*Tensor
	wBytes  int64
	maxCols int
}

func buildChain(tb testing.TB, be *Backend, shapes []chainShape, host bool, seed uint64) *chainBuilt {
	return buildChainExcl(tb, be, shapes, host, seed, 0)
}

// buildChainExcl is buildChain with every matvec's excl set (1: the last
// block keeps only the latency ops).
func buildChainExcl(tb testing.TB, be *Backend, shapes []chainShape, host bool, seed uint64, excl int32) *chainBuilt {
	tb.Helper()
	c := &chainBuilt{shapes: shapes}
	var total int
	offs := make([]int, len(shapes))
	for i, s := range shapes {
		offs[i] = total
		if s.spin > 0 {
			continue
		}
		total += s.rows * s.cols
		c.maxCols = max(c.maxCols, s.cols)
		if s.src >= i || (s.src >= 0 && (shapes[s.src].rows < s.cols || shapes[s.src].spin > 0)) {
			tb.Fatalf("chain shape %d reads %d values of op %d", i, s.cols, s.src)
		}
	}
	c.wBytes = int64(2 * total)
	if host {
		rng := rand.New(rand.NewPCG(seed, 7))
		c.wHost = make([]uint16, total)
		for i, s := range shapes {
			copy(c.wHost[offs[i]:], randF16(rng, s.rows*s.cols, 1/math.Sqrt(float64(s.cols))))
		}
		c.w = mustBytes(tb, be, unsafe.Slice((*byte)(unsafe.Pointer(&c.wHost[0])), 2*total)).(*Tensor)
		tb.Cleanup(func() { _ = be.Free(c.w) })
	} else {
		c.w = replicas(tb.(*testing.B), be, 2*total, 1)[0]
	}
	c.x0 = mustF32(tb, be, randF32(rand.New(rand.NewPCG(seed, 8)), c.maxCols, 1)).(*Tensor)
	tb.Cleanup(func() { _ = be.Free(c.x0) })
	for i, s := range shapes {
		y, err := be.Alloc(s.rows)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = be.Free(y) })
		c.ys = append(c.ys, y.(*Tensor))
		if s.spin > 0 {
			c.ops = append(c.ops, chainOp{y: c.ys[i].ptr, rows: 1, cols: int32(s.cols), dep: int32(s.dep), spin: int32(s.spin)})
			continue
		}
		x := c.x0.ptr
		if s.src >= 0 {
			x = c.ys[s.src].ptr
		}
		c.ops = append(c.ops, chainOp{w: c.w.ptr + cu.DevicePtr(2*offs[i]), x: x, y: c.ys[i].ptr,
			rows: int32(s.rows), cols: int32(s.cols), dep: int32(s.dep), excl: excl})
	}
	return c
}

// TestChainMatVec: the chain probe (each build) computes every op of a
// program with mixed shapes (ops with fewer rows than blocks, two ops
// reading one output, columns not a multiple of 256, one, two and four rows
// a warp, x in registers at 2,048 columns, matvecs after latency ops) within
// float64's bound from the outputs it read, gives the same
// bits under each strategy, and never reads an output before its op
// finished: each launch starts from a new input with every output poisoned
// (NaN). The last launch of each build also writes its trace: every op a
// block owns rows of took cycles. chain_matvec_f16_regs and _regs16 (rows
// of 256 to 2,048 columns, the across strategy only) run their own program,
// and give the five-page build's bits on it.
func TestChainMatVec(t *testing.T) {
	be := testBE
	if !be.k.chainOK {
		t.Skip(errChainSmem)
	}
	all := []int{chainPlain, chainPlain, chainPDL, chainPDL, chainAcross, chainAcross}
	for kb, cb := range chainBuilds {
		if cb.perWarp {
			continue
		}
		wide := 5632 // chain_matvec_f16_s6 stages at most 4,096 values
		if wide > cb.xmax {
			wide = 4000
		}
		shapes := []chainShape{
			mv(6144, 2048, -1), mv(2048, 2048, 0), mv(64, 2048, 1), mv(11264, 2048, 1), mv(2048, wide, 3),
			mv(7, 8, 4), mv(1000, 1024, 4), mv(3000, 1000, 6), mv(133, 3000, 7), mv(2048, 128, 8),
			latOp(9, 2000), {6144, 2048, 1, 10, 0}, latOp(11, 500), mv(2048, 2048, 11),
		}
		t.Run(cb.name, func(t *testing.T) { checkChain(t, be, shapes, kb, all) })
	}
	// Fewer rows than the grid's 1,056 warps, a warp with one row or several, 256 to 2,048 columns.
	regs := []chainShape{
		mv(6144, 2048, -1), mv(2048, 2048, 0), mv(64, 2048, 1), mv(4096, 256, 1), mv(1000, 512, 3),
		latOp(4, 2000), {2048, 1024, 3, 5, 0}, latOp(6, 500), {7, 2048, 6, 7, 0}, mv(3000, 2048, 6),
	}
	// The last block kept for latency ops (excl): the rows move to the other blocks, the bits stay.
	for _, kb := range []int{chainS5, chainRegs} {
		t.Run(chainBuilds[kb].name+"/excl", func(t *testing.T) {
			ref := checkChain(t, be, regs, kb, []int{chainAcross, chainAcross})
			got := checkChainExcl(t, be, regs, kb, []int{chainAcross, chainAcross}, 1)
			for j := range ref {
				if math.Float32bits(got[j]) != math.Float32bits(ref[j]) {
					t.Fatalf("output value %d is %g with the last block left out, %g with it", j, got[j], ref[j])
				}
			}
		})
	}
	for _, kb := range []int{chainRegs, chainRegs16} {
		t.Run(chainBuilds[kb].name, func(t *testing.T) {
			ref := checkChain(t, be, regs, chainS5, []int{chainAcross, chainAcross})
			got := checkChain(t, be, regs, kb, []int{chainAcross, chainAcross, chainAcross, chainAcross})
			for j := range ref {
				if math.Float32bits(got[j]) != math.Float32bits(ref[j]) {
					t.Fatalf("output value %d is %g, the five-page build's %g", j, got[j], ref[j])
				}
			}
		})
	}
}

// checkChain runs build kb once per mode in modes (inputs alternating
// between two seeds) and checks each launch; it returns the first launch's
// outputs, flattened.
func checkChain(t *testing.T, be *Backend, shapes []chainShape, kb int, modes []int) []float32 {
	return checkChainExcl(t, be, shapes, kb, modes, 0)
}

func checkChainExcl(t *testing.T, be *Backend, shapes []chainShape, kb int, modes []int, excl int32) []float32 {
	c := buildChainExcl(t, be, shapes, true, 11, excl)
	p, err := be.newChain(c.ops)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.freeChain(p) })
	tr, err := be.AllocBytes(16 * p.n * p.grid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Free(tr) })
	nan := make([]float32, 11264)
	for i := range nan {
		nan[i] = float32(math.NaN())
	}
	var first [][]float32 // the first two launches' outputs, by input seed
	for round, mode := range modes {
		seed := uint64(round%2 + 20)
		if err := be.WriteF32(c.x0, randF32(rand.New(rand.NewPCG(seed, 8)), c.maxCols, 1)); err != nil {
			t.Fatal(err)
		}
		for i, y := range c.ys {
			if err := be.WriteF32(y, nan[:shapes[i].rows]); err != nil {
				t.Fatal(err)
			}
		}
		var trace cu.DevicePtr
		if round == len(modes)-1 {
			trace = tr.(*Tensor).ptr
		}
		if err := be.o.do(func() error { return be.launchChain(p, mode, kb, trace) }); err != nil {
			t.Fatal(err)
		}
		if err := be.Synchronize(); err != nil {
			t.Fatalf("mode %d: %v", mode, err)
		}
		x0 := mustRead(t, be, c.x0)
		outs := make([][]float32, len(shapes))
		for i := range shapes {
			outs[i] = mustRead(t, be, c.ys[i])
		}
		for i, s := range shapes {
			if s.spin > 0 {
				continue
			}
			x := x0
			if s.src >= 0 {
				x = outs[s.src]
			}
			w := c.wHost[int(c.ops[i].w-c.w.ptr)/2:]
			for r := range s.rows {
				var sum, mag float64
				for k := range s.cols {
					v := float64(half.F16ToF32(w[r*s.cols+k])) * float64(x[k])
					sum += v
					mag += math.Abs(v)
				}
				got := float64(outs[i][r])
				if math.IsNaN(got) || math.Abs(got-sum) > 1e-5*(1+mag) {
					t.Fatalf("mode %d round %d: op %d (%dx%d) row %d: %g, want %g (bound %g)", mode, round, i, s.rows, s.cols, r, got, sum, 1e-5*(1+mag))
				}
			}
		}
		if round < 2 {
			first = append(first, flatten(outs))
			continue
		}
		want := first[round%2]
		for j, v := range flatten(outs) {
			if math.Float32bits(v) != math.Float32bits(want[j]) {
				t.Fatalf("mode %d round %d: output value %d is %g, the first launch's %g", mode, round, j, v, want[j])
			}
		}
	}
	cyc := readChainTrace(t, be, tr.(*Tensor), p)
	units, per := p.grid, 1 // who owns rows: blocks, or (chain_matvec_f16_regs) warps, of which block blk's warp 0 traces
	if cb := chainBuilds[kb]; cb.perWarp {
		per = cb.threads / 32
		units *= per
	}
	for i, s := range shapes {
		owners := units
		if s.spin == 0 {
			owners = max(units-int(excl)*per, 1)
		}
		for blk := range p.grid {
			u := blk * per
			owns := u < owners && s.rows*(u+1)/owners > s.rows*u/owners
			if w, k := cyc[2*(i*p.grid+blk)], cyc[2*(i*p.grid+blk)+1]; owns && (w < 0 || k <= 0) {
				t.Fatalf("trace: op %d block %d: waited %d cycles, worked %d", i, blk, w, k)
			}
		}
	}
	return first[0]
}

func readChainTrace(t testing.TB, be *Backend, tr *Tensor, p *chainProgram) []int64 {
	t.Helper()
	var raw []byte
	if err := be.o.do(func() (err error) { raw, err = be.read(tr.ptr, 16*p.n*p.grid); return err }); err != nil {
		t.Fatal(err)
	}
	out := make([]int64, 2*p.n*p.grid)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(raw[8*i:]))
	}
	return out
}

func flatten(v [][]float32) []float32 {
	var out []float32
	for _, r := range v {
		out = append(out, r...)
	}
	return out
}

// chainPrograms are BenchmarkChain's programs: the dense FP16 matvecs of a
// decode step (q|k|v, o_proj; Qwen also the shared expert's gate|up|mix
// and down), each op reading the one before it; OLMoE's ops again with
// every op reading x0 (no op waits for another: the ring's streaming rate
// without dependencies); and an OLMoE-shaped layer with its latency: q|k|v,
// 6 µs for norm, RoPE and attention, o_proj, 9 µs for route, then FP16
// stand-ins of the 8 routed experts' bytes (gate|up 4,096 x 2,048, down
// 2,048 x 2,048), 16 layers; and that layer program with the last block
// kept for the latency ops (excl), so that no block spinning on one holds
// rows of the next matvec.
func chainPrograms() []struct {
	name   string
	shapes []chainShape
	excl   int32
} {
	olmoe, indep, qwen, layer := []chainShape{}, []chainShape{}, []chainShape{}, []chainShape{}
	for range 16 {
		n := len(olmoe)
		olmoe = append(olmoe, mv(6144, 2048, n-1), mv(2048, 2048, n))
		indep = append(indep, mv(6144, 2048, -1), mv(2048, 2048, -1))
		n = len(layer)
		layer = append(layer, mv(6144, 2048, n-1), latOp(n, 6000), chainShape{2048, 2048, n, n + 1, 0}, latOp(n+2, 9000),
			chainShape{4096, 2048, n + 2, n + 3, 0}, mv(2048, 2048, n+4))
	}
	for range 24 {
		n := len(qwen)
		qwen = append(qwen, mv(6144, 2048, n-1), mv(2048, 2048, n), mv(11265, 2048, n+1), mv(2048, 5632, n+2))
	}
	return []struct {
		name   string
		shapes []chainShape
		excl   int32
	}{{"olmoe-dense-16x2", olmoe, 0}, {"olmoe-indep-16x2", indep, 0}, {"olmoe-layer-16x6", layer, 0},
		{"olmoe-layer-excl-16x6", layer, 1}, {"qwen-dense-24x4", qwen, 0}}
}

// BenchmarkChain measures issue 14's premise on the dense matvecs of a
// decode step (537 MB for OLMoE's 32 ops, 2.47 GB for Qwen's 96) and on
// OLMoE-shaped layers with latency ops (940 MB): the same weight bytes read by
//
//	launched          one matvec_f16 launch an op (spin_ns for a latency op), plain launches
//	launched-pdl      the same as programmatic dependent launches
//	chain-plain       one chain_matvec_f16 launch, weights copied after each dependency wait
//	chain-pdl         the same, an op's first tiles copying before its wait
//	chain-across      the same, the next ops' tiles copying through every wait
//	chain-across-t512 chain-across with 512 threads a block
//	chain-across-p64  chain-across with three 64 KB pages (two rows a warp)
//	chain-across-s6   chain-across with a sixth page (programs of at most 4,096 columns)
//	chain-regs        chain_matvec_f16_regs: no shared memory, every warp streams its next
//	                  two rows into registers across the waits (rows of at most 2,048 columns)
//	chain-regs16      the same with 16 warps a block, x read again every row
//	stream            stream_read over the whole weight buffer, one launch (the ceiling)
//	stream-1blk       the same with one block an SM (the chain's grid, 8 warps an SM)
//
// us/kernel is the whole program; GB/s counts weight bytes only. Each chain
// mode then runs once with its trace: wait-kcyc is the mean over blocks of
// the SM cycles (thousands) spent waiting for dependencies, work-kcyc of
// the cycles spent on tiles (copy waits and dots), crit-kcyc the sum over
// ops of the slowest block's work.
func BenchmarkChain(b *testing.B) {
	be := testBE
	if !be.k.chainOK {
		b.Skip(errChainSmem)
	}
	sink := streamSink(b, be)
	for _, pr := range chainPrograms() {
		c := buildChainExcl(b, be, pr.shapes, false, 1, pr.excl) // freed when the whole benchmark ends
		p, err := be.newChain(c.ops)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = be.freeChain(p) })
		tr, err := be.AllocBytes(16 * p.n * p.grid)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = be.Free(tr) })
		run := func(name string, n int, issue func() error, after func(b *testing.B)) {
			b.Run(pr.name+"/"+name, func(b *testing.B) {
				newGPUTimer(b, be).measure(b, n, c.wBytes, func(int) error { return be.o.async(issue) })
				if after != nil {
					after(b)
				}
			})
		}
		launched := func(pdl bool) func() error {
			return func() error {
				pdl0, prev0 := be.pdl, be.pdlPrev
				be.pdl, be.pdlPrev = pdl, false
				defer func() { be.pdl, be.pdlPrev = pdl0, prev0 }()
				for _, op := range c.ops {
					var err error
					if op.w == 0 {
						err = be.launch(be.k.spin, 1, 1, 0, uint64(op.spin))
					} else {
						err = be.matvecF16LaunchGrid(0, op.y, op.w, op.x, 0, 0, int(op.rows), int(op.cols), normSpec{})
					}
					if err != nil {
						return err
					}
				}
				return nil
			}
		}
		run("launched", 4, launched(false), nil)
		run("launched-pdl", 4, launched(true), nil)
		type chainMode struct {
			name     string
			mode, kb int
		}
		modes := []chainMode{{"chain-plain", chainPlain, chainS5}, {"chain-pdl", chainPDL, chainS5}, {"chain-across", chainAcross, chainS5},
			{"chain-across-t512", chainAcross, chainT512}, {"chain-across-p64", chainAcross, chainP64}}
		if p.maxCols <= chainBuilds[chainS6].xmax {
			modes = append(modes, chainMode{"chain-across-s6", chainAcross, chainS6})
		}
		if p.regsOK {
			modes = append(modes, chainMode{"chain-regs", chainAcross, chainRegs}, chainMode{"chain-regs16", chainAcross, chainRegs16})
		}
		for _, m := range modes {
			run(m.name, 8, func() error { return be.launchChain(p, m.mode, m.kb, 0) }, func(b *testing.B) {
				// Unwritten entries (a block that owns no rows of an op) stay -1: not observed.
				if err := be.WriteBytes(tr, 0, bytes.Repeat([]byte{0xff}, 16*p.n*p.grid)); err != nil {
					b.Fatal(err)
				}
				if err := be.o.do(func() error { return be.launchChain(p, m.mode, m.kb, tr.(*Tensor).ptr) }); err != nil {
					b.Fatal(err)
				}
				if err := be.Synchronize(); err != nil {
					b.Fatal(err)
				}
				reportChainTrace(b, readChainTrace(b, be, tr.(*Tensor), p), p)
			})
		}
		stream := func(grid int) func() error {
			return func() error {
				return be.launch(be.k.streamRead, grid, block, 0, argPtr(c.w.ptr), uint64(c.wBytes/16), argPtr(sink.ptr))
			}
		}
		run("stream", 8, stream(be.residentBlocks(be.k.streamRead, 0)), nil)
		run("stream-1blk", 8, stream(be.sms), nil)
	}
}

// reportChainTrace reports a traced launch's wait, work and critical-path
// cycles (thousands; BenchmarkChain), over the entries the blocks wrote:
// an op a block owns no rows of was not observed there (-1) and adds
// nothing.
func reportChainTrace(b *testing.B, cyc []int64, p *chainProgram) {
	var wait, work, crit float64
	for i := range p.n {
		var slow int64
		for blk := range p.grid {
			w, k := cyc[2*(i*p.grid+blk)], cyc[2*(i*p.grid+blk)+1]
			if w < 0 || k < 0 {
				continue // not observed
			}
			wait += float64(w)
			work += float64(k)
			slow = max(slow, k)
		}
		crit += float64(slow)
	}
	b.ReportMetric(wait/float64(p.grid)/1e3, "wait-kcyc")
	b.ReportMetric(work/float64(p.grid)/1e3, "work-kcyc")
	b.ReportMetric(crit/1e3, "crit-kcyc")
}
