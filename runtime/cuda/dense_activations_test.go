//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/cache"
	"github.com/horizon-runmap/horizon/runtime/cpu"
	"github.com/horizon-runmap/horizon/runtime/engine"
	"github.com/horizon-runmap/horizon/runtime/half"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// TestMatMulA16 (the FP16-activation projections, MatMulA16): at every path
// a16Direct picks (split-K on the burst twin's FP16 build or, under its
// bound, the two-stage kernel's; unsplit on the chunk-shift pre-split; the
// rows rounded in FP32 below tcMinTokens or for columns not a multiple of
// 8) the outputs are, bit for bit, MatMul's on
// the activations the CPU rounded with half.ChunkShiftF16, and not MatMul's
// on the activations themselves; the path taken is the one a16Direct names
// (counted); MatMulPartsA16 gives each block MatMulA16's bits; and x is
// left as it was.
func TestMatMulA16(t *testing.T) {
	be := testBE
	withTuning(t, be, tuning{})
	rng := rand.New(rand.NewPCG(35, 16))
	for _, c := range []struct {
		rows []int
		cols int
	}{
		{[]int{2048, 2048, 2048}, 2048}, // q|k|v: split-K (fused) up to 512 tokens
		{[]int{5632}, 2048},             // Qwen's shared gate: unsplit from 256 tokens
		{[]int{2048}, 5632},             // Qwen's shared down: split-K
		{[]int{200, 100, 100}, 2048},    // blocks of partial tiles: one launch a block
		{[]int{96}, 36},                 // columns not a multiple of 8: rounded rows
	} {
		total := 0
		for _, r := range c.rows {
			total += r
		}
		wbits := make([]uint16, total*c.cols)
		for i := range wbits {
			wbits[i] = half.F32ToF16(float32(rng.NormFloat64() * 0.03))
		}
		w, err := be.UploadF16(wbits)
		if err != nil {
			t.Fatal(err)
		}
		for _, T := range []int{1, 15, 16, 64, 256, 512} {
			t.Run(fmt.Sprintf("%v/cols%d/T%d", c.rows, c.cols, T), func(t *testing.T) {
				x := make([]float32, T*c.cols)
				for i := range x {
					x[i] = float32(rng.NormFloat64() * math.Pow(10, rng.Float64()*3-1.5))
				}
				xr := append([]float32(nil), x...)
				for r := 0; r < T; r++ {
					half.ChunkShiftF16(xr[r*c.cols : (r+1)*c.cols])
				}
				xt, xrt := mustF32(t, be, x), mustF32(t, be, xr)
				off := 0
				var blocks []backend.Tensor
				var want [][]float32
				for _, r := range c.rows {
					wv, err := be.View(w, off*c.cols, r*c.cols)
					if err != nil {
						t.Fatal(err)
					}
					ref := mustF32(t, be, make([]float32, T*r))
					if err := be.MatMul(ref, wv, xrt, nil, T); err != nil {
						t.Fatal(err)
					}
					f32 := mustF32(t, be, make([]float32, T*r))
					if err := be.MatMul(f32, wv, xt, nil, T); err != nil {
						t.Fatal(err)
					}
					splits := backendCount(t, func(b *Backend) int { return b.a16cSplits + b.a16cInKernel })
					rounds := backendCount(t, func(b *Backend) int { return b.a16cRounds })
					got := mustF32(t, be, make([]float32, T*r))
					if err := be.MatMulA16(got, wv, xt, nil, T); err != nil {
						t.Fatal(err)
					}
					dSplits := backendCount(t, func(b *Backend) int { return b.a16cSplits + b.a16cInKernel }) - splits
					dRounds := backendCount(t, func(b *Backend) int { return b.a16cRounds }) - rounds
					var direct bool
					if err := be.o.do(func() error { direct = be.a16Direct(wv.(*Tensor).ptr, c.cols, T); return nil }); err != nil {
						t.Fatal(err)
					}
					if direct && (dSplits != 1 || dRounds != 0) || !direct && (dSplits != 0 || dRounds != 1) {
						t.Fatalf("block of %d rows: a16Direct %v, but %d chunk-shift pre-splits or in-kernel splits and %d rounded row sets", r, direct, dSplits, dRounds)
					}
					g, rf, f := mustRead(t, be, got), mustRead(t, be, ref), mustRead(t, be, f32)
					sameBits(t, fmt.Sprintf("block of %d rows (a16Direct %v): MatMulA16 against MatMul on the CPU-rounded rows", r, direct), g, rf)
					differ := 0
					for i := range g {
						if math.Float32bits(g[i]) != math.Float32bits(f[i]) {
							differ++
						}
					}
					if differ == 0 {
						t.Fatalf("block of %d rows: MatMulA16 gave MatMul's bits on the unrounded rows: nothing was rounded", r)
					}
					want = append(want, g)
					blocks = append(blocks, mustF32(t, be, make([]float32, T*r)))
					off += r
				}
				if err := be.MatMulPartsA16(blocks, c.rows, w, xt, nil, T); err != nil {
					t.Fatal(err)
				}
				for j := range blocks {
					sameBits(t, fmt.Sprintf("MatMulPartsA16 block %d against its MatMulA16", j), mustRead(t, be, blocks[j]), want[j])
				}
				sameBits(t, "x after MatMulA16", mustRead(t, be, xt), x)
			})
		}
	}
}

// TestDenseActivationsOnDevice: with the declared FP16 dense activations
// (engine.LoadOptions.DenseActivations fp16; alone and with FP16 expert
// activations) the GPU's batched prefill runs the chunk-shift pre-splits
// (counted), its tokens and logit bits do not depend on capacity or step
// mode, its logits are within the tensor cores' tolerance of the CPU
// reference's (the same rounding, other sums' order) with the same tokens,
// and they differ from FP32 dense activations' logits. Both tiny models; a
// prompt of two chunks.
func TestDenseActivationsOnDevice(t *testing.T) {
	withTuning(t, testBE, tuning{})
	// Its last GPU load may declare FP16 expert activations, which stay set
	// on the shared backend until the next Load; the tests after it (the
	// pre-split kernels' bits, TestTCPreSplitSameBits) expect FP32's.
	t.Cleanup(func() {
		if err := testBE.SetExpertActivations(backend.F32); err != nil {
			t.Error(err)
		}
	})
	prompt := promptIDs(strings.Repeat("Sixteen-bit activations for the dense projections. ", 12)[:engine.PrefillChunk+30])
	req := engine.Request{Prompt: prompt, Tokens: 16, SuppressEOS: true, LogitSteps: 16}
	for _, arch := range []string{"olmoe-tiny", "qwen2moe-tiny"} {
		art := testArtifact(t, arch, qpack.SchemeInt4)
		cfg, err := art.Config()
		if err != nil {
			t.Fatal(err)
		}
		for _, experts := range []string{"", engine.ExpertActFP16} {
			fp16 := engine.LoadOptions{Executor: "grouped-v1", Prefill: engine.PrefillBatched, DenseActivations: engine.ExpertActFP16, ExpertActivations: experts}
			f32 := fp16
			f32.DenseActivations = ""
			t.Run(fmt.Sprintf("%s/experts=%s", arch, f32.ExpertActivations), func(t *testing.T) {
				want32 := generate(t, testBE, testBE.ExpertRows(), art, f32, req)
				splits := backendCount(t, func(b *Backend) int { return b.a16cSplits + b.a16cRounds + b.a16cInKernel })
				want, _ := generateMode(t, art, fp16, req, engine.StepGraphFull)
				if n := backendCount(t, func(b *Backend) int { return b.a16cSplits + b.a16cRounds + b.a16cInKernel }) - splits; n < 2*2*cfg.NumLayers {
					t.Fatalf("%d FP16-activation projections in a two-chunk prefill of %d layers: the declared mode did not run", n, cfg.NumLayers)
				}
				for _, c := range []int{cfg.NumExperts, cfg.TopK + 2} {
					modes := []string{engine.StepOps, engine.StepGraphFull}
					if c < cfg.NumExperts {
						modes = []string{engine.StepOps, engine.StepGraphSegmented, engine.StepGraphWait}
					}
					for _, mode := range modes {
						o := fp16
						o.Capacity, o.StepMode = c, mode
						got, _ := generateMode(t, art, o, req, mode)
						sameResult(t, fmt.Sprintf("fp16 dense activations at c%d, %s", c, mode), got, want)
					}
				}
				differ := 0
				for i := range want.Logits[0] {
					if math.Float32bits(want.Logits[0][i]) != math.Float32bits(want32.Logits[0][i]) {
						differ++
					}
				}
				if differ == 0 {
					t.Fatal("FP16 dense activations gave FP32's first-step logits bit for bit")
				}
				again := generate(t, testBE, testBE.ExpertRows(), art, f32, req)
				sameResult(t, "an FP32 load after FP16 ones", again, want32)

				cb := cpu.New(0)
				cdev := cache.NewCPUDevice(cb)
				defer cdev.Close()
				ref := generate(t, cb, cdev, art, fp16, req)
				// As TestExpertActivationsOnDevice: a value whose FP32 bits differ
				// between the GPU and the CPU now and then rounds to the other
				// FP16 neighbour at its chunk's shift.
				for s := range ref.Logits {
					closeTo(t, fmt.Sprintf("step %d logits against the CPU's FP16 dense activations", s), want.Logits[s], ref.Logits[s], 5e-3, 5e-3)
				}
				if fmt.Sprint(want.Tokens) != fmt.Sprint(ref.Tokens) {
					t.Fatalf("GPU stream (fp16 dense activations) differs from the CPU's:\n got %v\nwant %v", want.Tokens, ref.Tokens)
				}
				t.Logf("%d of %d first-step logits differ from FP32 dense activations'; tokens %v, FP32's %v", differ, len(want.Logits[0]), want.Tokens, want32.Tokens)
			})
		}
	}
}
