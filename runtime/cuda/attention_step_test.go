//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gorgonia.org/cu"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/half"
)

// TestAttentionStepVariants: the captured steps' attention kernels that
// tunings pick (attention_pf_step: tuning.attPrefetch; attention_pipe_step:
// tuning.attPipe, with and without the prefetch; attention_ring_step:
// tuning.attRing, whose ring runs up to hd 128 where hd % 8 == 0, so at 40
// dims too, and whose prologue copies two rounds) give attention_step's
// bits, over FP32 and FP16 caches, at positions counts that leave a block's
// warps one round, several rounds and a partial last round (a round is 64
// positions a block at hd <= 128, 32 above, so the pipelined loop's
// next-round loads run only past ~1,024 positions), heads of 64, 128 and
// 256 dims and grouped-query heads. The tiny models of the step tests never
// reach a second round.
func TestAttentionStepVariants(t *testing.T) {
	withTuning(t, testBE, tuning{})
	be := testBE
	rng := rand.New(rand.NewPCG(23, 5))
	randF := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		return x
	}
	for _, hs := range []struct{ h, kv, hd int }{{16, 16, 128}, {4, 2, 128}, {4, 4, 64}, {2, 2, 256}, {2, 2, 40}, {2, 2, 36}} {
		for _, dt := range []backend.DType{backend.F32, backend.F16} {
			for _, n := range []int{1, 2, 65, 1024, 1025, 2048, 2113, 4100, 8064} {
				t.Run(fmt.Sprintf("h%d-kv%d-hd%d/%v/n%d", hs.h, hs.kv, hs.hd, dt, n), func(t *testing.T) {
					cache := func() backend.Tensor {
						x := randF(n * hs.kv * hs.hd)
						if dt == backend.F32 {
							return mustF32(t, be, x)
						}
						bits := make([]uint16, len(x))
						for i, v := range x {
							bits[i] = half.F32ToF16(v)
						}
						tn, err := be.UploadF16(bits)
						if err != nil {
							t.Fatal(err)
						}
						return tn
					}
					kc, vc := cache(), cache()
					q := mustF32(t, be, randF(hs.h*hs.hd))
					// st[1] = n - 1: the step's position (int32 bits in float32 words).
					st := mustF32(t, be, []float32{0, math.Float32frombits(uint32(n - 1))})
					part := mustF32(t, be, make([]float32, hs.h*attSplit*(hs.hd+2)))
					cnt := mustF32(t, be, make([]float32, hs.h)) // zero words: the tickets
					k := be.k.kv[kvIndex(dt)]
					run := func(fn func(dst backend.Tensor) error) []float32 {
						dst, err := be.Alloc(hs.h * hs.hd)
						if err != nil {
							t.Fatal(err)
						}
						if err := be.o.do(func() error { return fn(dst) }); err != nil {
							t.Fatal(err)
						}
						return mustRead(t, be, dst)
					}
					args := func(dst backend.Tensor) []uint64 {
						return []uint64{argPtr(ptr(dst)), argPtr(ptr(part)), argPtr(ptr(cnt)), argPtr(ptr(q)), argPtr(ptr(kc)),
							argPtr(ptr(vc)), argPtr(ptr(st)), argInt(hs.h), argInt(hs.kv), argInt(hs.hd)}
					}
					grid := hs.h * attSplit
					want := run(func(dst backend.Tensor) error {
						return be.launch(k.attentionStep, grid, block, 0, args(dst)...)
					})
					for _, v := range []struct {
						name string
						fn   func(dst backend.Tensor) error
					}{
						{"pf64", func(dst backend.Tensor) error {
							return be.launch(k.attentionPfStep, grid, block, 0, append(args(dst), argInt(64))...)
						}},
						{"pipe", func(dst backend.Tensor) error {
							return be.launch(k.attentionPipeStep, grid, block, 0, append(args(dst), argInt(0))...)
						}},
						{"pipe-pf128", func(dst backend.Tensor) error {
							return be.launch(k.attentionPipeStep, grid, block, 0, append(args(dst), argInt(128))...)
						}},
						{"ring", func(dst backend.Tensor) error {
							return be.launch(k.attentionRingStep, grid, block, attRingSmem, args(dst)...)
						}},
					} {
						got := run(v.fn)
						for i := range want {
							if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
								t.Fatalf("%s: output %d is %v, attention_step gives %v", v.name, i, got[i], want[i])
							}
						}
					}
					if math.IsNaN(float64(want[0])) {
						t.Fatalf("attention_step gave NaN")
					}
				})
			}
		}
	}
}

// BenchmarkAttentionStep: one decode attention launch over an FP16 cache of
// n positions (HORIZON_BENCH_DEPTHS, default 2048 and 8064) at the
// OLMoE-1B-7B and Qwen1.5-MoE-A2.7B attention shape (16 heads, 16 kv heads,
// hd 128; both models have it), each launch on another replica of the
// cache so that L2 holds none of it: attention_step (plain), the register
// pipe (pipe, and pipe-pf128 after a 128-row L2 prefetch) and the
// shared-memory ring (ring: tuning.attRing's kernel). Bytes are the K and V
// rows read; the GB/s is the kernel's alone, the rate that bounds a decode
// step's growth with depth.
func BenchmarkAttentionStep(b *testing.B) {
	be := testBE
	depths := benchDepths(b, []int{2048, 8064})
	const heads, hd = 16, 128
	k := be.k.kv[kvIndex(backend.F16)]
	for _, n := range depths {
		size := n * heads * hd * 2
		kcs := replicas(b, be, size, rotation(2*size))
		vcs := replicas(b, be, size, len(kcs))
		q := mustF32(b, be, randF32(rand.New(rand.NewPCG(2, 2)), heads*hd, 1)).(*Tensor)
		st := mustF32(b, be, []float32{0, math.Float32frombits(uint32(n - 1))}).(*Tensor)
		part := mustF32(b, be, make([]float32, heads*attSplit*(hd+2))).(*Tensor)
		cnt := mustF32(b, be, make([]float32, heads)).(*Tensor)
		dst, err := be.Alloc(heads * hd)
		if err != nil {
			b.Fatal(err)
		}
		d := dst.(*Tensor)
		for _, v := range []struct {
			name string
			fn   cu.Function
			smem int
			rows int // the pipe's prefetch argument; -1: none
		}{{"plain", k.attentionStep, 0, -1}, {"pipe", k.attentionPipeStep, 0, 0}, {"pipe-pf128", k.attentionPipeStep, 0, 128},
			{"ring", k.attentionRingStep, attRingSmem, -1}} {
			b.Run(fmt.Sprintf("n%d/%s", n, v.name), func(b *testing.B) {
				g := newGPUTimer(b, be)
				g.measure(b, min(64, max(8, len(kcs))), int64(2*size), func(i int) error {
					return be.o.do(func() error {
						args := []uint64{argPtr(d.ptr), argPtr(part.ptr), argPtr(cnt.ptr), argPtr(q.ptr), argPtr(kcs[i%len(kcs)].ptr),
							argPtr(vcs[i%len(vcs)].ptr), argPtr(st.ptr), argInt(heads), argInt(heads), argInt(hd)}
						if v.rows >= 0 {
							args = append(args, argInt(v.rows))
						}
						return be.launch(v.fn, heads*attSplit, block, v.smem, args...)
					})
				})
			})
		}
	}
}
