//go:build cuda

package cuda

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/executor"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// hbmCeiling is the H200's measured device-to-device copy rate (bytes read
// + written per second, GPU-NOTES.md): the ceiling the kernels are compared
// against.
const hbmCeiling = 4.26e12

// rotationBytes is how much distinct weight memory a benchmark rotates
// through: far more than the 60 MB L2, so every launch streams from HBM.
const rotationBytes = 1536 << 20

// gpuTimer times launches with CUDA events. Each batch first enqueues a
// spin kernel, then the start event, the batch's launches and the stop
// event: the launches queue up behind the spin and run back to back, so the
// events time the kernels, not Go's ~4 µs per launch. If the spin ended
// before the last launch was enqueued the batch is discarded and the spin
// doubled.
type gpuTimer struct {
	be          *Backend
	start, stop cu.Event
	spin        time.Duration
}

func newGPUTimer(b *testing.B, be *Backend) *gpuTimer {
	g := &gpuTimer{be: be, spin: 2 * time.Millisecond}
	err := be.o.do(func() (err error) {
		if g.start, err = cu.MakeEvent(cu.DefaultEvent); err != nil {
			return err
		}
		g.stop, err = cu.MakeEvent(cu.DefaultEvent)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = be.o.do(func() error { return errorsJoin(cu.DestroyEvent(&g.start), cu.DestroyEvent(&g.stop)) })
	})
	return g
}

func errorsJoin(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// batch returns the GPU time of n issues divided by n.
func (g *gpuTimer) batch(b *testing.B, n int, issue func(i int) error) time.Duration {
	for tries := 0; ; tries++ {
		be := g.be
		err := be.o.do(func() error {
			if err := be.launch(be.k.spin, 1, 1, 0, uint64(g.spin.Nanoseconds())); err != nil {
				return err
			}
			return g.start.Record(be.compute)
		})
		if err != nil {
			b.Fatal(err)
		}
		for i := range n {
			if err := issue(i); err != nil {
				b.Fatal(err)
			}
		}
		var ms float64
		covered := true
		err = be.o.do(func() error {
			if err := g.start.Query(); err == nil {
				covered = false // the GPU reached the start before the last launch was issued
			}
			if err := g.stop.Record(be.compute); err != nil {
				return err
			}
			if err := g.stop.Synchronize(); err != nil {
				return err
			}
			var err error
			ms, err = g.start.Elapsed(g.stop)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		if covered || tries >= 6 {
			if !covered {
				b.Logf("spin of %v did not cover the issue of %d launches; timing includes issue gaps", g.spin, n)
			}
			return time.Duration(ms * 1e6 / float64(n))
		}
		g.spin *= 2
	}
}

// measure warms the GPU up (clocks ramp under load), then times b.N
// batches and reports the median per-op time, GB/s for bytesPerOp, and
// the percentage of the HBM ceiling.
func (g *gpuTimer) measure(b *testing.B, n int, bytesPerOp int64, issue func(i int) error) {
	warm := time.Now()
	for time.Since(warm) < 200*time.Millisecond {
		g.batch(b, n, issue)
	}
	times := make([]time.Duration, 0, b.N)
	off := 0
	b.ResetTimer()
	for range b.N {
		o := off
		times = append(times, g.batch(b, n, func(i int) error { return issue(o + i) }))
		off += n
	}
	b.StopTimer()
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	med := times[len(times)/2]
	gbs := float64(bytesPerOp) / med.Seconds() / 1e9
	b.ReportMetric(float64(med.Nanoseconds()), "ns/op")
	b.ReportMetric(float64(med.Nanoseconds())/1e3, "us/kernel")
	b.ReportMetric(gbs, "GB/s")
	b.ReportMetric(100*gbs*1e9/hbmCeiling, "%HBM")
	b.ReportMetric(float64(bytesPerOp)/1e6, "MB/op")
}

// replicas allocates count device buffers of size bytes holding the same
// random contents (FP16-safe: no Inf/NaN bit patterns) and frees them when
// the benchmark ends.
func replicas(b *testing.B, be *Backend, size, count int) []*Tensor {
	rng := rand.New(rand.NewPCG(uint64(size), uint64(count)))
	host := make([]byte, size)
	for i := 0; i+8 <= size; i += 8 {
		*(*uint64)(unsafe.Pointer(&host[i])) = rng.Uint64() & 0x3bff3bff3bff3bff
	}
	out := make([]*Tensor, count)
	for i := range out {
		t, err := be.AllocBytes(size)
		if err != nil {
			b.Fatal(err)
		}
		out[i] = t.(*Tensor)
		if i == 0 {
			if err := be.WriteBytes(t, 0, host); err != nil {
				b.Fatal(err)
			}
			continue
		}
		err = be.o.do(func() error { return cu.MemcpyDtoDAsync(out[i].ptr, out[0].ptr, int64(size), be.compute) })
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := be.Synchronize(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		for _, t := range out {
			_ = be.Free(t)
		}
	})
	return out
}

func rotation(size int) int { return max(2, rotationBytes/size) }

// withTuning sets the backend's launch tuning for one benchmark (results do
// not depend on it, only speed) and restores the tuning it found afterwards.
func withTuning(b testing.TB, be *Backend, t tuning) {
	if t.tcDecode < 0 || t.tcDecode > len(tcDecodeVariants) {
		b.Fatalf("tuning.tcDecode %d: want 0 (off) or 1..%d (tcDecodeVariants)", t.tcDecode, len(tcDecodeVariants))
	}
	set := func(t tuning) {
		if err := be.o.do(func() error { return be.setTuning(t) }); err != nil {
			b.Fatal(err)
		}
	}
	// The cleanup restores the tuning found here, not the default: a
	// subtest that tunes inside a test that tunes returns to its parent's.
	var prev tuning
	if err := be.o.do(func() error { prev = be.tune; return nil }); err != nil {
		b.Fatal(err)
	}
	set(t)
	b.Cleanup(func() { set(prev) })
}

// BenchmarkMatVecF16: FP16 weights, FP32 x: attention-sized, OLMoE's
// lm_head and Qwen's lm_head. Target: >= 75% of the HBM ceiling. The
// 2048x2048 case also runs with each rows-per-task variant (-r1, -r2, -r4;
// the plain name is the default heuristic).
func BenchmarkMatVecF16(b *testing.B) {
	be := testBE
	type variant struct {
		rows, cols int
		nr         int
	}
	cases := []variant{{2048, 2048, 0}, {50304, 2048, 0}, {151936, 2048, 0}, {2048, 2048, 1}, {2048, 2048, 2}, {2048, 2048, 4},
		// OLMoE's q|k|v (3 x 2048 rows) and Qwen1.5-MoE's shared gate|up|mix (2 x 5632 + 1) and
		// shared down (2048 x 5632), each with every rows-per-task variant.
		{6144, 2048, 0}, {6144, 2048, 1}, {6144, 2048, 2}, {6144, 2048, 4},
		{11265, 2048, 0}, {11265, 2048, 1}, {11265, 2048, 2}, {11265, 2048, 4},
		{2048, 5632, 0}, {2048, 5632, 1}, {2048, 5632, 2}, {2048, 5632, 4}}
	for _, s := range cases {
		name := fmt.Sprintf("%dx%d", s.rows, s.cols)
		if s.nr != 0 {
			name += fmt.Sprintf("-r%d", s.nr)
		}
		b.Run(name, func(b *testing.B) {
			withTuning(b, be, tuning{f16NR: s.nr})
			ws := replicas(b, be, s.rows*s.cols*2, rotation(s.rows*s.cols*2))
			x := mustF32(b, be, randF32(rand.New(rand.NewPCG(1, 1)), s.cols, 1)).(*Tensor)
			y, _ := be.Alloc(s.rows)
			yt := y.(*Tensor)
			bytes := int64(s.rows*s.cols*2 + s.cols*4 + s.rows*4)
			n := min(64, max(8, len(ws)))
			g := newGPUTimer(b, be)
			g.measure(b, n, bytes, func(i int) error {
				return be.matvecF16("bench", yt.ptr, ws[i%len(ws)].ptr, x.ptr, 0, 0, s.rows, s.cols)
			})
		})
	}
}

// BenchmarkMatVecW4A16: one qpack-int4-b256-v1 matrix (the expert shapes of
// OLMoE and Qwen, and a tall 16384-row matrix that shows the streaming rate
// without launch ramp/tail; the tall one also with each rows-per-task
// variant). Target: >= 60%. A single 1 MB expert matrix cannot get near it:
// at 4.26 TB/s its bytes take 0.25 µs, less than a kernel launch.
func BenchmarkMatVecW4A16(b *testing.B) {
	be := testBE
	for _, s := range []struct {
		name       string
		rows, cols int
		nr         int
	}{
		{"olmoe-gate-1024x2048", 1024, 2048, 0}, {"olmoe-down-2048x1024", 2048, 1024, 0},
		{"qwen-gate-1408x2048", 1408, 2048, 0}, {"qwen-down-2048x1408", 2048, 1408, 0},
		{"tall-16384x2048", 16384, 2048, 0},
		{"tall-16384x2048-r1", 16384, 2048, 1}, {"tall-16384x2048-r2", 16384, 2048, 2},
		{"tall-16384x2048-r4", 16384, 2048, 4}, {"tall-16384x2048-r8", 16384, 2048, 8},
	} {
		b.Run(s.name, func(b *testing.B) {
			withTuning(b, be, tuning{w4NR: s.nr})
			l, _ := qpack.NewRecordLayout(qpack.SchemeInt4, s.cols, s.rows)
			m := l.Gate
			ms := replicas(b, be, m.Bytes, rotation(m.Bytes))
			x := mustF32(b, be, randF32(rand.New(rand.NewPCG(1, 1)), s.cols, 1)).(*Tensor)
			y, _ := be.Alloc(s.rows)
			yt := y.(*Tensor)
			bytes := int64(m.Bytes + s.cols*4 + s.rows*4)
			g := newGPUTimer(b, be)
			g.measure(b, 64, bytes, func(i int) error {
				return be.matvecW4("bench", yt.ptr, ms[i%len(ms)].ptr, x.ptr, m.Rows, m.Cols, m.ColsPadded, m.ScalesOffset)
			})
		})
	}
}

// BenchmarkExperts: a routed group of the real models through the grouped
// kernels (gate/up+SiLU, down+combine, both = grouped-v1's step) and,
// for comparison, scalar-v1 (5 launches per expert). Expert rows rotate
// through ~1.5 GB of records, so every group reads cold rows like decode
// does. Target for the grouped kernels: >= 60%. Variants: gate/up with 4+4
// rows per task (-p4), down with each kernel variant (r4, r8, r4c1: rows per
// task and chunks per step) and 8, 16 or 32 output rows per block
// (-r8-t16 ...); the plain names are the defaults; tc4-*, tc8-*, tca4-* are the
// _t kernels on the tensor cores (tuning.tcDecode).
func BenchmarkExperts(b *testing.B) {
	be := testBE
	for _, c := range []struct {
		name        string
		hidden, ffn int
		topK        int
	}{{"olmoe-A8", 2048, 1024, 8}, {"qwen-A4", 2048, 1408, 4}} {
		l, _ := qpack.NewRecordLayout(qpack.SchemeInt4, c.hidden, c.ffn)
		groupRows := func(pool []*Tensor, g int) []backend.Tensor {
			rows := make([]backend.Tensor, c.topK)
			for k := range rows {
				rows[k] = pool[(g*c.topK+k)%len(pool)]
			}
			return rows
		}
		weights := make([]float32, c.topK)
		for i := range weights {
			weights[i] = 1 / float32(c.topK)
		}
		setup := func(b *testing.B) ([]*Tensor, backend.Tensor, backend.Tensor, backend.Tensor) {
			pool := replicas(b, be, l.Size, rotation(l.Size))
			x := mustF32(b, be, randF32(rand.New(rand.NewPCG(2, 2)), c.hidden, 1))
			act, _ := be.Alloc(c.topK * c.ffn)
			_ = be.WriteF32(act, randF32(rand.New(rand.NewPCG(3, 3)), c.topK*c.ffn, 0.1))
			out, _ := be.Alloc(c.hidden)
			return pool, x, act, out
		}
		gu := int64(c.topK * (l.Gate.Bytes + l.Up.Bytes))
		dn := int64(c.topK * l.Down.Bytes)
		gateup := func(name string, t tuning) {
			b.Run(c.name+"/"+name, func(b *testing.B) {
				withTuning(b, be, t)
				pool, x, act, _ := setup(b)
				newGPUTimer(b, be).measure(b, 32, gu, func(i int) error { return be.ExpertGateUp(act, groupRows(pool, i), l, x) })
			})
		}
		down := func(name string, t tuning) {
			b.Run(c.name+"/"+name, func(b *testing.B) {
				withTuning(b, be, t)
				pool, _, act, out := setup(b)
				newGPUTimer(b, be).measure(b, 32, dn, func(i int) error {
					return be.ExpertDownCombine(out, groupRows(pool, i), l, act, weights)
				})
			})
		}
		gateup("gateup", tuning{})
		gateup("gateup-p4", tuning{gateUpNRP: 4})
		down("down", tuning{})
		down("down-global", tuning{downGlobal: true})
		for i, dv := range downVariants {
			for _, tile := range []int{8, 16, 32} {
				down(fmt.Sprintf("down-%s-t%d", dv.suffix, tile), tuning{downVariant: i + 1, downTile: tile})
			}
		}
		b.Run(c.name+"/fused", func(b *testing.B) {
			pool, x, _, out := setup(b)
			newGPUTimer(b, be).measure(b, 32, gu+dn, func(i int) error {
				return be.FusedExperts(out, groupRows(pool, i), l, x, weights)
			})
		})
		// The captured step's kernels: the _t gate/up and down and the
		// fused experts_moe_int4_t, reading their groups from row tables in
		// device memory (one per group, rotating over the pool like the
		// by-value variants). The moe-* variants set its diagnostic flags:
		// without the L2 prefetch, without the down phase, without the
		// barrier; moe-pf-pair is its gate/up with the prefetch followed by
		// the separate down kernel.
		seq := func(name string, t tuning, bytes int64, kernels ...string) {
			b.Run(c.name+"/"+name, func(b *testing.B) {
				withTuning(b, be, t)
				pool, x, act, out := setup(b)
				const nt = 512
				tb, err := be.AllocBytes(nt * tableBytes)
				if err != nil {
					b.Fatal(err)
				}
				bar, err := be.AllocBytes(4)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = be.Free(tb); _ = be.Free(bar) })
				host := make([]byte, 0, nt*tableBytes)
				for g := range nt {
					ptrs := make([]uint64, c.topK)
					for k, r := range groupRows(pool, g) {
						ptrs[k] = uint64(r.(*Tensor).ptr)
					}
					tbl := encodeTable(ptrs, weights)
					host = append(host, tbl[:]...)
				}
				if err := be.WriteBytes(tb, 0, host); err != nil {
					b.Fatal(err)
				}
				tp, bp := tb.(*Tensor).ptr, bar.(*Tensor).ptr
				ap, xp, op := act.(*Tensor).ptr, x.(*Tensor).ptr, out.(*Tensor).ptr
				newGPUTimer(b, be).measure(b, 32, bytes, func(i int) error {
					rt := rowTable{dev: tp + cu.DevicePtr((i%nt)*tableBytes)}
					return be.o.async(func() error {
						for _, k := range kernels {
							var err error
							switch k {
							case "gateup":
								err = be.gateUpLaunchFrom(ap, xp, c.topK, l, rt)
							case "down":
								err = be.downLaunchFrom(op, ap, c.topK, l, rt, 0, false)
							case "moe":
								err = be.moeLaunch(op, ap, xp, c.topK, l, rt, 0, bp)
							}
							if err != nil {
								return err
							}
						}
						return nil
					})
				})
			})
		}
		seq("t-gateup", tuning{}, gu, "gateup")
		seq("t-down", tuning{}, dn, "down")
		seq("t-down-global", tuning{downGlobal: true}, dn, "down")
		seq("t-pair-global", tuning{downGlobal: true}, gu+dn, "gateup", "down")
		seq("t-pair", tuning{}, gu+dn, "gateup", "down")
		// The decode experts on the tensor cores (experts_tc.cu,
		// tuning.tcDecode: tcDecodeVariants).
		for i, v := range tcDecodeVariants {
			seq(v+"-gateup", tuning{tcDecode: i + 1}, gu, "gateup")
			seq(v+"-down", tuning{tcDecode: i + 1}, dn, "down")
			seq(v+"-pair", tuning{tcDecode: i + 1}, gu+dn, "gateup", "down")
		}
		seq("moe", tuning{}, gu+dn, "moe")
		seq("moe-nopf", tuning{moeFlags: moeNoPrefetch}, gu+dn, "moe")
		seq("moe-nodown", tuning{moeFlags: moeNoDown}, gu, "moe")
		seq("moe-nodown-nopf", tuning{moeFlags: moeNoDown | moeNoPrefetch}, gu, "moe")
		seq("moe-gateup", tuning{moeFlags: moeNoDown | moeNoBarrier | moeNoPrefetch}, gu, "moe")
		seq("moe-gateup-pf", tuning{moeFlags: moeNoDown | moeNoBarrier}, gu, "moe")
		seq("moe-pf-pair", tuning{moeFlags: moeNoDown | moeNoBarrier}, gu+dn, "moe", "down")
		b.Run(c.name+"/scalar-v1", func(b *testing.B) {
			pool, x, _, out := setup(b)
			ex, err := executor.New("scalar-v1", be, l, c.topK)
			if err != nil {
				b.Fatal(err)
			}
			newGPUTimer(b, be).measure(b, 8, gu+dn, func(i int) error {
				return ex.Forward(out, x, groupRows(pool, i), weights)
			})
		})
	}
}

// BenchmarkStream is the ceiling reference for the row kernels, measured in
// the same run: stream_read reads the same number of bytes (rotating through
// 1.5 GB like the others) with the same 16-byte load and nothing else, one
// launch per op; empty-kernel is the launch floor of a full grid with no
// memory traffic. A row kernel's time over stream_read's for its size is
// what its own structure costs; stream_read's over bytes/4.26 TB/s is what
// one launch of that size costs anyway (ramp-up, tail, launch gap).
func BenchmarkStream(b *testing.B) {
	be := testBE
	sink := streamSink(b, be)
	var grid int
	if err := be.o.do(func() error { grid = be.residentBlocks(be.k.streamRead, 0); return nil }); err != nil {
		b.Fatal(err)
	}
	for _, s := range []struct {
		name  string
		bytes int
	}{
		{"1MB-expert-matrix", 1 << 20}, {"8MB-f16-2048x2048", 2048 * 2048 * 2}, {"8.5MB-olmoe-down-A8", 8 * 1064960},
		{"17MB-olmoe-gateup-A8", 16 * 1064960}, {"25.5MB-olmoe-fused-A8", 24 * 1064960}, {"206MB-f16-50304x2048", 50304 * 2048 * 2},
	} {
		b.Run("read-"+s.name, func(b *testing.B) {
			size := s.bytes / 16 * 16
			bufs := replicas(b, be, size, rotation(size))
			g := newGPUTimer(b, be)
			g.measure(b, 64, int64(size), func(i int) error {
				p := bufs[i%len(bufs)].ptr
				return be.o.async(func() error {
					return be.launch(be.k.streamRead, grid, block, 0, argPtr(p), uint64(size/16), argPtr(sink.ptr))
				})
			})
		})
	}
	b.Run("empty-kernel", func(b *testing.B) {
		g := newGPUTimer(b, be)
		g.measure(b, 64, 0, func(int) error {
			return be.o.async(func() error { return be.launch(be.k.empty, 2*be.sms, block, 0) })
		})
	})
}

// streamSink is stream_read's sink word (freed when the benchmark ends).
func streamSink(b *testing.B, be *Backend) *Tensor {
	t, err := be.Alloc(32)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = be.Free(t) })
	return t.(*Tensor)
}

// BenchmarkIssue measures the host side: wall time per asynchronous op
// issued through the context-owner goroutine (a 2048-value Add), the floor
// under every small kernel of a decode step until steps run as CUDA graphs.
func BenchmarkIssue(b *testing.B) {
	be := testBE
	x := mustF32(b, be, make([]float32, 2048))
	y, _ := be.Alloc(2048)
	b.ResetTimer()
	for range b.N {
		if err := be.Add(y, x, x); err != nil {
			b.Fatal(err)
		}
	}
	if err := be.Synchronize(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRoundTrip: one launch then a host read (TopK over 64 router
// logits), the synchronising pattern of every routed layer.
func BenchmarkRoundTrip(b *testing.B) {
	be := testBE
	l := mustF32(b, be, randF32(rand.New(rand.NewPCG(4, 4)), 64, 1))
	b.ResetTimer()
	for range b.N {
		if _, _, err := be.TopK(l, 8, false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRoundTripParts takes the round trip apart, each part with the
// owner hand-offs spinning (the default) and parking (-park, the old
// behaviour), and TopK with its result read back by a copy (-copy, the old
// path) or from mapped memory:
//
//	hop          an empty do: the caller -> owner -> caller hand-off alone
//	launch-sync  one do that launches an empty kernel and syncs the stream
//	topk         BenchmarkRoundTrip
//	argmax       Argmax over 50304 logits with one masked id
//	read-8KB     ReadF32 of 2048 values
func BenchmarkRoundTripParts(b *testing.B) {
	be := testBE
	logits := mustF32(b, be, randF32(rand.New(rand.NewPCG(4, 4)), 64, 1))
	vocab := mustF32(b, be, randF32(rand.New(rand.NewPCG(5, 5)), 50304, 1))
	vec := mustF32(b, be, randF32(rand.New(rand.NewPCG(6, 6)), 2048, 1))
	host := make([]float32, 2048)
	parts := []struct {
		name string
		fn   func() error
	}{
		{"hop", func() error { return be.o.do(func() error { return nil }) }},
		{"launch-sync", func() error {
			return be.o.do(func() error {
				if err := be.launch(be.k.empty, 1, 32, 0); err != nil {
					return err
				}
				return be.compute.Synchronize()
			})
		}},
		{"topk", func() error { _, _, err := be.TopK(logits, 8, false); return err }},
		{"argmax", func() error { _, err := be.Argmax(vocab, []int{7}); return err }},
		{"read-8KB", func() error { return be.ReadF32(vec, host) }},
	}
	for _, park := range []bool{false, true} {
		for _, copyBack := range []bool{false, true} {
			for _, p := range parts {
				if copyBack && p.name != "topk" && p.name != "argmax" {
					continue
				}
				name := p.name
				if copyBack {
					name += "-copy"
				}
				if park {
					name += "-park"
				}
				b.Run(name, func(b *testing.B) {
					withTuning(b, be, tuning{noMapped: copyBack})
					spin := be.o.spin.Load()
					be.o.spin.Store(spin && !park)
					defer be.o.spin.Store(spin)
					for range 100 {
						if err := p.fn(); err != nil {
							b.Fatal(err)
						}
					}
					b.ResetTimer()
					for range b.N {
						if err := p.fn(); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// BenchmarkHBMCopy: device-to-device copies of 1, 2 and 4 GiB on the
// compute stream (cuMemcpyDtoDAsync), GB/s counting the bytes read and
// written: the method of GPU-NOTES.md's H200 figure (4.26 TB/s), which
// package ceilings rates decode against (ceilings.Options). On another GPU
// it gives that GPU's figure for `horizon-bench ceilings --gpu NAME
// --hbm-tbps X`:
//
//	cuda.test -test.run '^$' -test.bench BenchmarkHBMCopy -test.benchtime 5x
func BenchmarkHBMCopy(b *testing.B) {
	be := testBE
	for _, gib := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("%dGiB", gib), func(b *testing.B) {
			size := gib << 30
			bufs := make([]*Tensor, 2)
			for i := range bufs {
				t, err := be.AllocBytes(size)
				if err != nil {
					b.Fatal(err)
				}
				bufs[i] = t.(*Tensor)
				b.Cleanup(func() { _ = be.Free(t) })
			}
			g := newGPUTimer(b, be)
			g.measure(b, 4, 2*int64(size), func(i int) error {
				src, dst := bufs[i%2], bufs[(i+1)%2]
				return be.o.do(func() error { return cu.MemcpyDtoDAsync(dst.ptr, src.ptr, int64(size), be.compute) })
			})
		})
	}
}
