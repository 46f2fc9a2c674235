//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/engine"
	"github.com/horizon-runmap/horizon/runtime/half"
	"github.com/horizon-runmap/horizon/runtime/observe"
	"github.com/horizon-runmap/horizon/runtime/qpack"

	"gorgonia.org/cu"
)

// tcBound is the tensor-core matmul's error bound for one output: each
// activation is split relative to the largest magnitude of its 32-value
// chunk (about 22 bits kept) and the chunk sums are FP32, so the bound is
// 2e-6 x sum_k m_k |w_k| with m_k that largest magnitude (kernels/emu/mmtc.cpp
// checks the kernel against the same bound on the CPU).
func tcBound(x []float32, w []float32) float64 {
	var s, m float64
	for k := range x {
		if k%32 == 0 {
			m = 0
			for _, v := range x[k:min(k+32, len(x))] {
				m = math.Max(m, math.Abs(float64(v)))
			}
		}
		s += m * math.Abs(float64(w[k]))
	}
	return 2e-6*s + 1e-30
}

// TestMatmulTC: by default (tuning.noMatmulTC unset) the batched ops run
// batches of at least tcMinTokens tokens on the tensor cores (and smaller ones on the row
// kernels), and with split-K (the default) a matmul of few blocks in column
// splits; every output is within tcBound of a float64 reference, both
// matrix formats, with gathered and scattered rows, both bias kinds,
// activations over many orders of magnitude and beyond FP16's range; a
// token's outputs are the same bits whichever other tokens share the launch.
func TestMatmulTC(t *testing.T) {
	withTuning(t, testBE, tuning{})
	be := testBE
	rng := rand.New(rand.NewPCG(14, 1))
	randX := func(n int, decades float64) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * math.Pow(10, (rng.Float64()*2-1)*decades))
		}
		if decades > 4 && n > 0 {
			x[n/2] = 3e5 // beyond FP16's range
		}
		return x
	}
	upload := func(x []float32) backend.Tensor {
		tn, err := be.Alloc(len(x))
		if err != nil {
			t.Fatal(err)
		}
		if err := be.WriteF32(tn, x); err != nil {
			t.Fatal(err)
		}
		return tn
	}
	read := func(tn backend.Tensor) []float32 {
		out := make([]float32, tn.Len())
		if err := be.ReadF32(tn, out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	check := func(t *testing.T, what string, got []float32, x, w []float32, rows, cols int, bias []float32) {
		t.Helper()
		for r := range rows {
			ref := 0.0
			if bias != nil {
				ref = float64(bias[r])
			}
			wr := w[r*cols : (r+1)*cols]
			for k := range cols {
				ref += float64(x[k]) * float64(wr[k])
			}
			if d := math.Abs(float64(got[r]) - ref); !(d <= tcBound(x, wr)) {
				t.Fatalf("%s row %d: %g, reference %g (bound %g)", what, r, got[r], ref, tcBound(x, wr))
			}
		}
	}
	for _, c := range []struct {
		T, rows, cols int
		decades       float64
		splitK        bool // split-K on (tuning.tcNoSplitK off): these shapes fill few blocks, so they split
	}{{16, 64, 64, 1, false}, {70, 96, 100, 2, false}, {130, 130, 2048, 1, false}, {20, 72, 256, 8, false},
		{16, 64, 2048, 1, true}, {64, 2048, 2048, 1, true}, {20, 72, 256, 8, true}, {130, 130, 2048, 2, true}} {
		t.Run(fmt.Sprintf("MatMul/T%d/%dx%d/splitk=%v", c.T, c.rows, c.cols, c.splitK), func(t *testing.T) {
			withTuning(t, be, tuning{tcNoSplitK: !c.splitK})
			if c.splitK && testBE.tcSplit(c.T, c.rows, c.cols) < 2 {
				t.Fatalf("tcSplit(%d, %d, %d) does not split", c.T, c.rows, c.cols)
			}
			bits := make([]uint16, c.rows*c.cols)
			w := make([]float32, len(bits))
			for i := range bits {
				bits[i] = half.F32ToF16(float32(rng.NormFloat64() * 0.05))
				w[i] = half.F16ToF32(bits[i])
			}
			wt, err := be.UploadF16(bits)
			if err != nil {
				t.Fatal(err)
			}
			bias := make([]float32, c.rows)
			for i := range bias {
				bias[i] = float32(rng.NormFloat64())
			}
			x := randX(c.T*c.cols, c.decades)
			before := tcLaunchCount(t)
			for _, withBias := range []bool{false, true} {
				var bt backend.Tensor
				var bv []float32
				if withBias {
					bt, bv = upload(bias), bias
				}
				dst, _ := be.Alloc(c.T * c.rows)
				if err := be.MatMul(dst, wt, upload(x), bt, c.T); err != nil {
					t.Fatal(err)
				}
				got := read(dst)
				for tok := range c.T {
					check(t, fmt.Sprintf("token %d (bias %v)", tok, withBias), got[tok*c.rows:(tok+1)*c.rows], x[tok*c.cols:(tok+1)*c.cols], w, c.rows, c.cols, bv)
				}
			}
			if tcLaunchCount(t)-before != 2 {
				t.Fatalf("%d tensor-core launches for two MatMul calls of %d tokens", tcLaunchCount(t)-before, c.T)
			}
		})
	}
	for _, scheme := range []qpack.Scheme{qpack.SchemeInt4, qpack.SchemeFP16} {
		for _, sh := range []struct{ rows, cols int }{{1024, 2048}, {2048, 1408}, {72, 96}} {
			t.Run(fmt.Sprintf("ExpertMatMul/%s/%dx%d", scheme, sh.rows, sh.cols), func(t *testing.T) {
				layout, err := qpack.NewRecordLayout(scheme, sh.cols, sh.rows)
				if err != nil {
					t.Fatal(err)
				}
				m := layout.Gate
				rec := make([]byte, layout.Size)
				w := make([]float32, sh.rows*sh.cols)
				for i := range w {
					w[i] = float32(rng.NormFloat64() * 0.05)
				}
				if scheme == qpack.SchemeInt4 {
					if _, err := qpack.QuantizeMatrix(rec[m.Offset:m.Offset+m.Bytes], w, sh.rows, sh.cols); err != nil {
						t.Fatal(err)
					}
					qpack.DequantizeMatrix(w, rec[m.Offset:m.Offset+m.Bytes], sh.rows, sh.cols)
				} else {
					if _, err := qpack.EncodeFP16Matrix(rec[m.Offset:m.Offset+m.Bytes], w); err != nil {
						t.Fatal(err)
					}
					qpack.DecodeFP16Matrix(w, rec[m.Offset:m.Offset+m.Bytes])
				}
				row, err := be.AllocBytes(len(rec))
				if err != nil {
					t.Fatal(err)
				}
				if err := be.WriteBytes(row, 0, rec); err != nil {
					t.Fatal(err)
				}
				const T = 40
				x := randX((T+2)*sh.cols, 2)
				xt := upload(x)
				xRows, dstRows := rng.Perm(T + 2)[:T], rng.Perm(T + 3)[:T]
				run := func(n int) []float32 {
					dst := upload(make([]float32, (T+3)*sh.rows))
					if err := be.ExpertMatMul(dst, dstRows[:n], row, m, scheme, xt, xRows[:n]); err != nil {
						t.Fatal(err)
					}
					return read(dst)
				}
				got := run(T)
				for i := range T {
					check(t, fmt.Sprintf("input row %d -> output row %d", xRows[i], dstRows[i]), got[dstRows[i]*sh.rows:(dstRows[i]+1)*sh.rows],
						x[xRows[i]*sh.cols:(xRows[i]+1)*sh.cols], w, sh.rows, sh.cols, nil)
				}
				// The first 20, 5 and 1 of the 40 alone (still tensor cores,
				// tcExperts: whatever the pair count): the same bits.
				for _, n := range []int{20, 5, 1} {
					sub := run(n)
					for i := range n {
						a, b := got[dstRows[i]*sh.rows:(dstRows[i]+1)*sh.rows], sub[dstRows[i]*sh.rows:(dstRows[i]+1)*sh.rows]
						for r := range a {
							if math.Float32bits(a[r]) != math.Float32bits(b[r]) {
								t.Fatalf("output row %d, value %d: %g among 40 tokens, %g among %d", dstRows[i], r, a[r], b[r], n)
							}
						}
					}
				}
			})
		}
	}
}

// TestExpertMatMulGroupTC: by default ExpertMatMulGroup runs every
// expert, whatever its pair count (70, 5, 40, 17 and 1 here: two 64-pair
// table entries for the first), in one tensor-core launch, and every
// pair's outputs are the bits of one ExpertMatMul per expert (tcExperts:
// on the tensor cores too), both matrix formats and the real experts'
// shapes.
func TestExpertMatMulGroupTC(t *testing.T) {
	withTuning(t, testBE, tuning{})
	be := testBE
	rng := rand.New(rand.NewPCG(15, 2))
	for _, scheme := range []qpack.Scheme{qpack.SchemeInt4, qpack.SchemeFP16} {
		for _, sh := range []struct{ rows, cols int }{{1024, 2048}, {2048, 1408}, {72, 96}} {
			t.Run(fmt.Sprintf("%s/%dx%d", scheme, sh.rows, sh.cols), func(t *testing.T) {
				layout, err := qpack.NewRecordLayout(scheme, sh.cols, sh.rows)
				if err != nil {
					t.Fatal(err)
				}
				m := layout.Gate
				counts := []int{70, 5, 40, 17, 1}
				recs := make([]backend.Tensor, len(counts))
				for j := range recs {
					recs[j] = tcGateRecord(t, rng, layout, scheme, sh.rows, sh.cols)
				}
				const nx = 50
				x := make([]float32, nx*sh.cols)
				for i := range x {
					x[i] = float32(rng.NormFloat64())
				}
				xt, err := be.Alloc(len(x))
				if err != nil {
					t.Fatal(err)
				}
				if err := be.WriteF32(xt, x); err != nil {
					t.Fatal(err)
				}
				total := 0
				for _, c := range counts {
					total += c
				}
				out := rng.Perm(total)
				xRows, dstRows := make([][]int, len(counts)), make([][]int, len(counts))
				for j, c := range counts {
					xRows[j], dstRows[j] = make([]int, c), out[:c]
					out = out[c:]
					for i := range c {
						xRows[j][i] = rng.IntN(nx)
					}
				}
				run := func(grouped bool) []float32 {
					dst, err := be.Alloc(total * sh.rows)
					if err != nil {
						t.Fatal(err)
					}
					if err := be.WriteF32(dst, make([]float32, total*sh.rows)); err != nil {
						t.Fatal(err)
					}
					if grouped {
						before := tcLaunchCount(t)
						if err := be.ExpertMatMulGroup(dst, dstRows, recs, m, scheme, xt, xRows); err != nil {
							t.Fatal(err)
						}
						if n := tcLaunchCount(t) - before; n != 1 {
							t.Fatalf("%d tensor-core launches for one grouped call, want 1", n)
						}
					} else {
						for j := range recs {
							if err := be.ExpertMatMul(dst, dstRows[j], recs[j], m, scheme, xt, xRows[j]); err != nil {
								t.Fatal(err)
							}
						}
					}
					got := make([]float32, total*sh.rows)
					if err := be.ReadF32(dst, got); err != nil {
						t.Fatal(err)
					}
					return got
				}
				got, want := run(true), run(false)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("output row %d, value %d: grouped %g, per expert %g", i/sh.rows, i%sh.rows, got[i], want[i])
					}
				}
			})
		}
	}
}

// tcLaunchCount reads the test backend's count of tensor-core matmul
// launches.
func tcLaunchCount(t *testing.T) int {
	return backendCount(t, func(b *Backend) int { return b.tcLaunches })
}

// TestBatchedPrefillTensorCores: by default a batched prefill's
// projections run on the tensor cores; its tokens are the same at full and
// partial residency and in every captured step mode (a token's results do
// not depend on the batch), with an FP32 and an FP16 KV cache, and its
// first decode step's logits stay within the HF oracle's tolerance (1e-3)
// of token-at-a-time prefill's.
func TestBatchedPrefillTensorCores(t *testing.T) {
	withTuning(t, testBE, tuning{})
	prompt := promptIDs(strings.Repeat("Tensor cores read each weight tile once for 64 tokens. ", 3))
	for _, arch := range []string{"olmoe-tiny", "qwen2moe-tiny"} {
		for _, scheme := range []qpack.Scheme{qpack.SchemeInt4, qpack.SchemeFP16} {
			art := testArtifact(t, arch, scheme)
			cfg, err := art.Config()
			if err != nil {
				t.Fatal(err)
			}
			for _, kv := range []string{"fp32", "fp16"} {
				req := engine.Request{Prompt: prompt, Tokens: 12, SuppressEOS: true, LogitSteps: 4}
				tok := generate(t, testBE, testBE.ExpertRows(), art, engine.LoadOptions{Executor: "grouped-v1", Prefill: engine.PrefillToken, KV: kv}, req)
				var ref []int
				for _, c := range []int{cfg.NumExperts, cfg.TopK + 2} {
					modes := []string{engine.StepOps, engine.StepGraphFull}
					if c < cfg.NumExperts {
						modes = []string{engine.StepOps, engine.StepGraphSegmented, engine.StepGraphWait}
					}
					for _, mode := range modes {
						t.Run(fmt.Sprintf("%s/%s/kv-%s/c%d/%s", arch, scheme, kv, c, mode), func(t *testing.T) {
							before := tcLaunchCount(t)
							got := generate(t, testBE, testBE.ExpertRows(), art,
								engine.LoadOptions{Executor: "grouped-v1", Capacity: c, StepMode: mode, Prefill: engine.PrefillBatched, KV: kv}, req)
							if tcLaunchCount(t) == before {
								t.Fatalf("a batched prefill of %d tokens launched no tensor-core matmul", len(prompt))
							}
							if ref == nil {
								ref = got.Tokens
							} else if !reflect.DeepEqual(got.Tokens, ref) {
								t.Fatalf("tokens %v, the first configuration's %v", got.Tokens, ref)
							}
							closeTo(t, "first step logits against token-at-a-time prefill", got.Logits[0], tok.Logits[0], 1e-3, 1e-3)
						})
					}
				}
			}
		}
	}
}

// BenchmarkPrefillModes times prefill at full residency (editionKnobs:
// or at a partial capacity) on the artifacts
// named by HORIZON_BENCH_ARTIFACTS (directories separated by ':'; skipped
// when unset), for prompts of the lengths in HORIZON_BENCH_PROMPTS
// (comma-separated, default 32,512,2048; ids 100 + 7919i mod 30000, as
// scripts/prefill-h200.sh, or with HORIZON_BENCH_PROMPT_IDS a file of ids
// repeated to each length, as the contracts' repeat-truncate-v1 does: see
// benchPromptIDs): token at a time (graph-full steps), batched on
// the row kernels (tuning.noMatmulTC), and batched on the tensor cores
// (the default). It
// reports prompt tok/s (prompt tokens / the engine's PrefillSeconds) and
// logs the largest first-step logit difference of each batched mode from
// token at a time and whether their 8 tokens agree
// (HORIZON_BENCH_PREFILL_MODES, comma-separated, keeps some of the modes:
// token, batched, batched-tc (the default: split-K and the pre-split, the
// routing kept on the device at full residency, the fragment-direct grouped
// kernel for small launches, its small-entry build where the pairs average
// at most 16 an expert), batched-tc-splitk (no pre-split,
// tuning.tcNoPreSplit), batched-tc-presplit (no split-K, tuning.tcNoSplitK),
// batched-tc-plain (neither), batched-tc-noring (the int4 experts'
// two-stage kernel, not their cp.async ring: tuning.tcNoRing),
// batched-tc-ring-f16 (the FP16 projections' ring too: tuning.tcRingF16),
// batched-tc-ring2 (the int4 ring with two chunks a stage: tuning.tcRing2),
// batched-tc-narrow and batched-tc-ring2-narrow (the narrow twins where
// every expert of a launch has at most 32 pairs: tuning.tcNarrow),
// batched-tc-readback (each layer's routing read back: tuning.noRouteDevice),
// batched-tc-nofd and batched-tc-fdall (the fragment-direct grouped kernel
// never, tuning.tcNoFD, or for every launch, tuning.tcFDAlways),
// batched-tc-nofd16 (not the small-entry build: tuning.tcNoFD16),
// batched-tc-readback-nofd (both: session 24's default), batched-tc-fdk
// (the fragment-direct FP16 split-K: tuning.tcFDSplitK), batched-tc-nopdl
// (plain launches op by op: tuning.noPrefillPDL; programmatic dependent
// launch is the default since session 26),
// batched-tc-att32 (the 32-query tiled attention: tuning.attTiled32),
// batched-tc-all (fdall and fdk), batched-tc-nofuse (the q|k|v
// projections as three MatMuls: tuning.noPartsFused), batched-tc-noburst
// (that and the split-K projections' two-stage kernel, tuning.tcNoBurst:
// session 31's default), batched-tc-nogateup (a device routing's gate, up
// and SiLUMul as three launches: tuning.tcNoGateUp), batched-tc-goal132 and
// batched-tc-goal66 (the split-K projections aim for 132 or 66 blocks, not
// 264: fewer splits of more chunks, other bits; tuning.tcSplitGoal),
// batched-tc-sep (the q/k norms, RoPE and KV append as separate ops and the
// top-k a block a row: tuning.noAttnInRows, noTopKWarp), batched-tc-s3 (the
// small-entry kernels with three activation stages: tuning.tcFD16S3),
// batched-tc-a16 (the fragment-direct grouped kernels on FP16 activations:
// tuning.tcA16, other bits), batched-tc-a16all (and the burst split-K
// projections: tuning.tcA16Dense), batched-tc-a16r and batched-tc-a16rall
// (the same with one shift a token row: tuning.tcA16Row; a16r is what the
// declared FP16 expert activations run), batched-tc-a16rd (a16r with the
// declared FP16 dense activations, engine.LoadOptions.DenseActivations:
// what ttft-v1's and prefill-v1's FP16 configurations declare), batched-tc-noatc (the tiled FP32
// attention instead of the tensor cores' over an FP16 cache, the default
// since session 35: tuning.noAttTC, other bits; BenchmarkPrefillModes's
// caches are FP32, where the two are one kernel and noatc is skipped,
// unless HORIZON_BENCH_KV=fp16);
// HORIZON_BENCH_PREFILL_PROFILE=1 logs a
// batched mode's engine.PrefillProfile from one more run; editionKnobs
// make the requests more like an edition worker's). A length that does not
// fit the model's context (with 16 positions to spare) is skipped with a
// log line. Run with -benchtime=1x.
func BenchmarkPrefillModes(b *testing.B) {
	dirs := os.Getenv("HORIZON_BENCH_ARTIFACTS")
	if dirs == "" {
		b.Skip("HORIZON_BENCH_ARTIFACTS not set")
	}
	lengths := []int{32, 512, 2048}
	if s := os.Getenv("HORIZON_BENCH_PROMPTS"); s != "" {
		lengths = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				b.Fatalf("HORIZON_BENCH_PROMPTS: %q is not a positive length", f)
			}
			lengths = append(lengths, n)
		}
	}
	modes := []struct {
		name    string
		prefill string
		tn      tuning
	}{{"token", engine.PrefillToken, tuning{}}, {"batched", engine.PrefillBatched, tuning{noMatmulTC: true}}, {"batched-tc", engine.PrefillBatched, tuning{}},
		{"batched-tc-splitk", engine.PrefillBatched, tuning{tcNoPreSplit: true}},
		{"batched-tc-presplit", engine.PrefillBatched, tuning{tcNoSplitK: true}},
		{"batched-tc-plain", engine.PrefillBatched, tuning{tcNoSplitK: true, tcNoPreSplit: true}},
		{"batched-tc-noring", engine.PrefillBatched, tuning{tcNoRing: true}},
		{"batched-tc-ring-f16", engine.PrefillBatched, tuning{tcRingF16: true}},
		{"batched-tc-ring2", engine.PrefillBatched, tuning{tcRing2: true}},
		{"batched-tc-narrow", engine.PrefillBatched, tuning{tcNarrow: true}},
		{"batched-tc-ring2-narrow", engine.PrefillBatched, tuning{tcRing2: true, tcNarrow: true}},
		{"batched-tc-readback", engine.PrefillBatched, tuning{noRouteDevice: true}},
		{"batched-tc-nofd", engine.PrefillBatched, tuning{tcNoFD: true}},
		{"batched-tc-fdall", engine.PrefillBatched, tuning{tcFDAlways: true}},
		{"batched-tc-nofd16", engine.PrefillBatched, tuning{tcNoFD16: true}},
		{"batched-tc-readback-nofd", engine.PrefillBatched, tuning{noRouteDevice: true, tcNoFD: true, noPrefillPDL: true}},
		{"batched-tc-fdk", engine.PrefillBatched, tuning{tcFDSplitK: true}},
		{"batched-tc-nopdl", engine.PrefillBatched, tuning{noPrefillPDL: true}},
		{"batched-tc-att32", engine.PrefillBatched, tuning{attTiled32: true}},
		{"batched-tc-all", engine.PrefillBatched, tuning{tcFDAlways: true, tcFDSplitK: true}},
		{"batched-tc-nofuse", engine.PrefillBatched, tuning{noPartsFused: true}},
		{"batched-tc-noburst", engine.PrefillBatched, tuning{tcNoBurst: true, noPartsFused: true}},
		{"batched-tc-nogateup", engine.PrefillBatched, tuning{tcNoGateUp: true}},
		{"batched-tc-goal132", engine.PrefillBatched, tuning{tcSplitGoal: 132}},
		{"batched-tc-goal66", engine.PrefillBatched, tuning{tcSplitGoal: 66}},
		{"batched-tc-sep", engine.PrefillBatched, tuning{noAttnInRows: true, noTopKWarp: true}},
		{"batched-tc-s3", engine.PrefillBatched, tuning{tcFD16S3: true}},
		{"batched-tc-a16", engine.PrefillBatched, tuning{tcA16: true}},
		{"batched-tc-a16all", engine.PrefillBatched, tuning{tcA16: true, tcA16Dense: true}},
		{"batched-tc-a16r", engine.PrefillBatched, tuning{tcA16Row: true}},
		{"batched-tc-a16rall", engine.PrefillBatched, tuning{tcA16Row: true, tcA16Dense: true}},
		{"batched-tc-a16rd", engine.PrefillBatched, tuning{tcA16Row: true}},
		{"batched-tc-noatc", engine.PrefillBatched, tuning{noAttTC: true}}}
	if s := os.Getenv("HORIZON_BENCH_PREFILL_MODES"); s != "" {
		keep := modes[:0]
		for _, m := range modes {
			if slices.Contains(strings.Split(s, ","), m.name) {
				keep = append(keep, m)
			}
		}
		if len(keep) == 0 {
			var names []string
			for _, m := range modes {
				names = append(names, m.name)
			}
			b.Fatalf("HORIZON_BENCH_PREFILL_MODES %q names none of %s", s, strings.Join(names, ", "))
		}
		modes = keep
	}
	for _, dir := range strings.Split(dirs, ":") {
		art, err := qpack.Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		cfg, err := art.Config()
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range lengths {
			if n+16 > cfg.MaxPositions {
				b.Logf("%s: a %d-token prompt and 8 output tokens do not fit its %d-position context; skipped", filepath.Base(dir), n, cfg.MaxPositions)
				continue
			}
			ids := benchPromptIDs(b, n, cfg.VocabSize)
			ek := editionKnobsOf(b)
			req := engine.Request{Prompt: ids, Tokens: 8, SuppressEOS: true, LogitSteps: 1}
			if ek.decode > 0 {
				req.Tokens, req.LogitSteps = ek.decode, 0
			}
			if n+7+req.Tokens > cfg.MaxPositions {
				b.Logf("%s: a %d-token prompt and %d output tokens do not fit its %d-position context; skipped", filepath.Base(dir), n, req.Tokens, cfg.MaxPositions)
				continue
			}
			// the request run before each timed one: the same, or (edition
			// knob alternate) one of a prompt 7 tokens shorter or longer
			before := req
			if ek.alternate {
				before.Prompt = benchPromptIDs(b, max(1, n-7), cfg.VocabSize)
				if n <= 8 {
					before.Prompt = benchPromptIDs(b, n+7, cfg.VocabSize)
				}
			}
			var ref engine.Result
			for _, m := range modes {
				b.Run(fmt.Sprintf("%s/%d/%s", filepath.Base(dir), n, m.name), func(b *testing.B) {
					if m.tn.noAttTC && os.Getenv("HORIZON_BENCH_KV") != "fp16" {
						// attnTC runs over FP16 caches only: over FP32 the mode would
						// time the default's tiled kernel under another name.
						b.Skip("the tensor-core attention (what noatc turns off) needs HORIZON_BENCH_KV=fp16")
					}
					withTuning(b, testBE, m.tn)
					l, err := engine.Load(testBE, testBE.ExpertRows(), art, engine.LoadOptions{Executor: "grouped-v1", Prefill: m.prefill,
						MaxSeq: max(n+16, max(n, len(before.Prompt))+req.Tokens), KV: os.Getenv("HORIZON_BENCH_KV"), Trace: ek.trace,
						Capacity: ek.capacity, Spares: ek.spares,
						ExpertActivations: ek.expertAct, DenseActivations: denseModeActivations(m.name)})
					if err != nil {
						b.Fatal(err)
					}
					defer l.Close()
					if ek.vram {
						vs, err := observe.StartVRAM(0, observe.DefaultVRAMInterval)
						if err != nil {
							b.Fatal(err)
						}
						defer vs.Stop()
					}
					if _, err := l.Generate(req); err != nil { // warm-up
						b.Fatal(err)
					}
					var res engine.Result
					for range b.N {
						if ek.alternate {
							if _, err := l.Generate(before); err != nil {
								b.Fatal(err)
							}
						}
						l.Cache.TakeTrace() // as a worker does after each request
						if res, err = l.Generate(req); err != nil {
							b.Fatal(err)
						}
					}
					if !res.PrefillTimed || res.PrefillSeconds <= 0 {
						b.Fatalf("prefill not timed (%v s)", res.PrefillSeconds)
					}
					b.ReportMetric(float64(n)/res.PrefillSeconds, "prompt-tok/s")
					if os.Getenv("HORIZON_BENCH_PREFILL_PROFILE") != "" && m.prefill == engine.PrefillBatched {
						prof := l.ProfilePrefill(true)
						if _, err := l.Generate(req); err != nil {
							b.Fatal(err)
						}
						l.ProfilePrefill(false)
						b.Logf("%s profile (waits around every instruction): %s", m.name, prof)
					}
					if ref.Tokens == nil {
						ref = res
						return
					}
					if len(res.Logits) == 0 || len(ref.Logits) == 0 {
						return // edition knob decode: no logits read
					}
					worst := 0.0
					for i, v := range res.Logits[0] {
						worst = math.Max(worst, math.Abs(float64(v)-float64(ref.Logits[0][i])))
					}
					b.Logf("%s: first-step logits within %.3g of token at a time; 8 tokens agree: %v", m.name, worst, reflect.DeepEqual(res.Tokens, ref.Tokens))
				})
			}
		}
	}
}

// editionKnobs make BenchmarkPrefillModes' requests more like an
// edition worker's, one difference at a time, to find what separates an
// edition's prefill_seconds from the benchmark's (results/h100-s37):
//
//	HORIZON_BENCH_TRACE=1         the cache's routing trace on (a worker loads with Trace)
//	HORIZON_BENCH_DECODE=N        N output tokens and no logits read, so decode
//	                              steps run with lookahead (PERF-REAL-v1: 128)
//	HORIZON_BENCH_EXPERT_ACT=fp16 the declared FP16 expert activations (LoadOptions),
//	                              not a measurement knob's
//	HORIZON_BENCH_ALTERNATE=1     each timed request follows one of another prompt
//	                              length, as an edition's prompts do
//	HORIZON_BENCH_VRAM=1          NVML samples the GPU's memory every 20 ms meanwhile,
//	                              as a worker's observer does
//	HORIZON_BENCH_CAPACITY=C      C published rows a layer (partial residency: the
//	                              batched prefill serves each layer in waves through
//	                              the cache; the run before each timed request leaves
//	                              that request's own experts resident, so it misses
//	                              less than an edition's, which follows other prompts)
//	HORIZON_BENCH_SPARES=S        the cache's shared spare pool (LoadOptions.Spares;
//	                              0: top-k): with HORIZON_BENCH_PREFILL_PROFILE, where a
//	                              partial prefill's time goes at each pool size
//	                              (results/s40)
type editionKnobs struct {
	trace, alternate, vram bool
	decode                 int
	expertAct              string
	capacity, spares       int
}

func editionKnobsOf(b *testing.B) editionKnobs {
	k := editionKnobs{trace: os.Getenv("HORIZON_BENCH_TRACE") != "", alternate: os.Getenv("HORIZON_BENCH_ALTERNATE") != "",
		vram: os.Getenv("HORIZON_BENCH_VRAM") != "", expertAct: os.Getenv("HORIZON_BENCH_EXPERT_ACT")}
	for _, kn := range []struct {
		env  string
		dst  *int
		zero bool // 0 allowed
	}{{"HORIZON_BENCH_DECODE", &k.decode, false}, {"HORIZON_BENCH_CAPACITY", &k.capacity, false}, {"HORIZON_BENCH_SPARES", &k.spares, true}} {
		s := os.Getenv(kn.env)
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || (n == 0 && !kn.zero) {
			b.Fatalf("%s: %q is not a positive number", kn.env, s)
		}
		*kn.dst = n
	}
	return k
}

// TestTCPreSplitSameBits: with the pre-split (the default) the tensor-core matmuls
// read activations split once per op (tc_split_rows) and give the bits of
// the in-kernel split: a dense MatMul with a bias, and a grouped expert op
// (int4 and FP16, pair counts below, at and above a 64-pair tile, gathered
// rows), the real shapes; with the cp.async rings on and off (tuning.tcNoRing, tuning.tcRingF16) too: the
// dense MatMul split-K (T70) and pre-split (T600), the grouped op on either
// split; and the fragment-direct kernels (tuning.tcFDAlways, tuning.tcFDSplitK:
// the split-K T70 runs it, T600 is not split); the split-K T70 by default
// runs the burst twin, and the two-stage kernel under tuning.tcNoBurst.
func TestTCPreSplitSameBits(t *testing.T) {
	be := testBE
	rng := rand.New(rand.NewPCG(17, 4))
	randX := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * math.Pow(10, rng.Float64()*4-2))
		}
		return x
	}
	// same holds run's outputs under each tuning of variants to its outputs
	// under the in-kernel split (tcNoPreSplit), bit for bit.
	same := func(t *testing.T, run func() []float32, variants ...tuning) {
		t.Helper()
		withTuning(t, be, tuning{tcNoPreSplit: true})
		want := run()
		for _, v := range variants {
			withTuning(t, be, v)
			got := run()
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("tuning %+v: value %d is %g, the in-kernel split's %g", v, i, got[i], want[i])
				}
			}
		}
	}
	// T70: split-K (16 row tiles x 2 token groups under a wave, 4 chunks a
	// block: the two-stage kernel); T256: split-K with the burst twin (8 or
	// more chunks a block); T600: the pre-split kernel. Each also with the
	// FP16 cp.async ring (tuning.tcRingF16).
	for _, T := range []int{70, 256, 600} {
		t.Run(fmt.Sprintf("MatMul/T%d/2048x2048", T), func(t *testing.T) {
			const rows, cols = 2048, 2048
			bits := make([]uint16, rows*cols)
			for i := range bits {
				bits[i] = half.F32ToF16(float32(rng.NormFloat64() * 0.05))
			}
			wt, err := be.UploadF16(bits)
			if err != nil {
				t.Fatal(err)
			}
			x, bias := mustF32(t, be, randX(T*cols)), mustF32(t, be, randX(rows))
			run := func() []float32 {
				dst := mustF32(t, be, make([]float32, T*rows))
				if err := be.MatMul(dst, wt, x, bias, T); err != nil {
					t.Fatal(err)
				}
				return mustRead(t, be, dst)
			}
			same(t, run, tuning{}, tuning{tcRingF16: true}, tuning{tcFDSplitK: true}, tuning{tcNoBurst: true})
			// The burst twin's FP16-activation build (tuning.tcA16Dense):
			// within FP16's rounding of the activations where the burst
			// twin runs (T256: other bits), the same bits elsewhere.
			withTuning(t, be, tuning{})
			want := run()
			withTuning(t, be, tuning{tcA16Dense: true})
			got := run()
			d := relRMS(got, want)
			ks := be.tcSplit(T, rows, cols)
			if burst := ks > 1 && be.tcDenseBurst(wt.(*Tensor).ptr, cols, ks); burst != (d != 0) || d > 2e-3 || math.IsNaN(d) {
				t.Errorf("tcA16Dense: relative RMS difference %.3g from the FP32 activations' outputs (burst twin: %v), want 0 < d <= 2e-3 with the burst twin, else 0", d, burst)
			}
		})
	}
	for _, scheme := range []qpack.Scheme{qpack.SchemeInt4, qpack.SchemeFP16} {
		// Pair counts at and above a 64-pair tile, and a short prompt's
		// (every expert at most 32 pairs: the narrow kernels' launches;
		// at most 16 on average: the small-entry kernel's, an expert of
		// 17 or more cut into entries of 16).
		for _, counts := range [][]int{{70, 5, 64, 1}, {7, 32, 1, 19}, {16, 17, 2, 9}} {
			for _, sh := range []struct{ rows, cols int }{{1024, 2048}, {2048, 1408}} {
				t.Run(fmt.Sprintf("ExpertMatMulGroup/%s/%dx%d/%v", scheme, sh.rows, sh.cols, counts), func(t *testing.T) {
					layout, err := qpack.NewRecordLayout(scheme, sh.cols, sh.rows)
					if err != nil {
						t.Fatal(err)
					}
					m := layout.Gate
					recs := make([]backend.Tensor, len(counts))
					for j := range recs {
						recs[j] = tcGateRecord(t, rng, layout, scheme, sh.rows, sh.cols)
					}
					const nx = 50
					x := mustF32(t, be, randX(nx*sh.cols))
					total := 0
					xRows, dstRows := make([][]int, len(counts)), make([][]int, len(counts))
					for j, c := range counts {
						xRows[j], dstRows[j] = make([]int, c), make([]int, c)
						for i := range c {
							xRows[j][i], dstRows[j][i] = rng.IntN(nx), total+i
						}
						total += c
					}
					// The int4 cp.async ring (the default; FP16 has none), its
					// two-chunk-a-stage twin (tuning.tcRing2), the narrow
					// twins of both (tuning.tcNarrow; they run where every
					// expert has at most 32 pairs), the two-stage kernel
					// (tuning.tcNoRing), with either split, and the
					// fragment-direct kernel (tuning.tcFDAlways, pre-split only)
					// and its small-entry build (the default where the pairs
					// average at most 16 an expert, entries cut at 16 pairs;
					// tuning.tcNoFD16 turns it off) give the same bits.
					run := func() []float32 {
						dst := mustF32(t, be, make([]float32, total*sh.rows))
						if err := be.ExpertMatMulGroup(dst, dstRows, recs, m, scheme, x, xRows); err != nil {
							t.Fatal(err)
						}
						return mustRead(t, be, dst)
					}
					same(t, run, tuning{}, tuning{tcNoRing: true}, tuning{tcNoRing: true, tcNoPreSplit: true}, tuning{tcRing2: true}, tuning{tcRing2: true, tcNoPreSplit: true},
						tuning{tcNarrow: true}, tuning{tcNarrow: true, tcNoPreSplit: true}, tuning{tcNarrow: true, tcRing2: true},
						tuning{tcNarrow: true, tcRing2: true, tcNoPreSplit: true}, tuning{tcFDAlways: true}, tuning{tcNoFD16: true},
						tuning{tcNoFD16: true, tcFDAlways: true}, tuning{tcFD16S3: true})
					if scheme == qpack.SchemeInt4 {
						// The FP16-activation builds (tuning.tcA16, both the
						// fragment-direct kernel and its small-entry build;
						// tuning.tcA16Row, one shift a token row):
						// other bits, within FP16's rounding of each
						// activation (relative error 2^-11 a value, so a
						// sum's error ~3e-4 of its size; 2e-3 fails on a
						// wrong column or row).
						withTuning(t, be, tuning{tcFDAlways: true})
						want := run()
						for _, v := range []tuning{{tcA16: true, tcFDAlways: true}, {tcA16: true, tcFDAlways: true, tcNoFD16: true},
							{tcA16Row: true, tcFDAlways: true}, {tcA16Row: true, tcFDAlways: true, tcNoFD16: true}} {
							withTuning(t, be, v)
							got := run()
							if d := relRMS(got, want); d > 2e-3 || math.IsNaN(d) {
								t.Errorf("tuning %+v: relative RMS difference %.3g from the FP32 activations' outputs, want at most 2e-3", v, d)
							}
						}
					}
				})
			}
		}
	}
}

// TestTCGroupedKernelChoice: the grouped launch's kernel follows the
// tunings and the launch's pairs: FP16 matrices the two-stage kernels; int4
// the fragment-direct kernel where the pairs average at most 32 an expert
// (tcGroupedFD; its small-entry build where they average at most 16,
// tcGroupedFD16, unless tcNoFD16), else the ring, two chunks a stage under tcRing2, the
// narrow twins under tcNarrow only where every expert has at most 32 pairs;
// each pre-split unless tcNoPreSplit.
func TestTCGroupedKernelChoice(t *testing.T) {
	be := testBE
	k := &be.k
	calls := func(kind int, pairs ...int) []expertCall {
		var cs []expertCall
		for _, n := range pairs {
			cs = append(cs, expertCall{kind: kind, xr: make([]int, n)})
		}
		return cs
	}
	for _, tc := range []struct {
		name  string
		tn    tuning
		calls []expertCall
		want  cu.Function
		smem  int
	}{
		{"fp16", tuning{}, calls(1, 7), k.matmulTCGroupedPre[1], tcSmem},
		{"fp16 in-kernel split", tuning{tcNoPreSplit: true}, calls(1, 7), k.matmulTCGrouped[1], tcSmem},
		{"int4 ring", tuning{}, calls(0, 70, 60), k.matmulTCGroupedRing[1], tcSmemRing},
		{"int4 ring over 64 an expert", tuning{}, calls(0, 63, 66), k.matmulTCGroupedRing[1], tcSmemRing},
		{"int4 fragment-direct at 64 an expert", tuning{}, calls(0, 62, 66), k.matmulTCGroupedFD, tcSmemFD},
		{"int4 fragment-direct, small, no small-entry build", tuning{tcNoFD16: true}, calls(0, 7, 9, 1), k.matmulTCGroupedFD, tcSmemFD},
		{"int4 fragment-direct off", tuning{tcNoFD: true}, calls(0, 7), k.matmulTCGroupedRing[1], tcSmemRing},
		{"int4 two-stage", tuning{tcNoRing: true, tcNoFD: true}, calls(0, 7), k.matmulTCGroupedPre[0], tcSmem},
		{"int4 ring2", tuning{tcRing2: true}, calls(0, 70), k.matmulTCGroupedRing2[1], tcSmemRing2},
		{"narrow", tuning{tcNarrow: true, tcNoFD: true}, calls(0, 7, 32, 1), k.matmulTCGroupedNarrow[0][1], tcSmemRing},
		{"narrow, 33 pairs", tuning{tcNarrow: true, tcNoFD: true}, calls(0, 7, 33), k.matmulTCGroupedRing[1], tcSmemRing},
		{"narrow ring2 in-kernel split", tuning{tcNarrow: true, tcRing2: true, tcNoPreSplit: true}, calls(0, 3), k.matmulTCGroupedNarrow[1][0], tcSmemRing2},
		{"narrow without the ring", tuning{tcNarrow: true, tcNoRing: true, tcNoFD: true}, calls(0, 3), k.matmulTCGroupedPre[0], tcSmem},
		{"fragment-direct always", tuning{tcFDAlways: true}, calls(0, 7, 64, 330), k.matmulTCGroupedFD, tcSmemFD},
		{"fragment-direct over the ring tunings", tuning{tcFDAlways: true, tcRing2: true, tcNarrow: true}, calls(0, 7), k.matmulTCGroupedFD16, tcSmemFD16},
		{"fragment-direct over the ring tunings, over 16 an expert", tuning{tcFDAlways: true, tcRing2: true, tcNarrow: true}, calls(0, 70), k.matmulTCGroupedFD, tcSmemFD},
		{"fragment-direct, fp16", tuning{tcFDAlways: true}, calls(1, 7), k.matmulTCGroupedPre[1], tcSmem},
		{"fragment-direct needs the pre-split", tuning{tcFDAlways: true, tcNoPreSplit: true}, calls(0, 7), k.matmulTCGroupedRing[0], tcSmemRing},
		{"small-entry by default", tuning{}, calls(0, 7, 9, 1), k.matmulTCGroupedFD16, tcSmemFD16},
		{"small-entry off", tuning{tcNoFD16: true}, calls(0, 7, 9), k.matmulTCGroupedFD, tcSmemFD},
		{"small-entry at 16 an expert", tuning{}, calls(0, 7, 25), k.matmulTCGroupedFD16, tcSmemFD16},
		{"small-entry over 16 an expert", tuning{}, calls(0, 7, 26), k.matmulTCGroupedFD, tcSmemFD},
		{"small-entry, fp16", tuning{}, calls(1, 7), k.matmulTCGroupedPre[1], tcSmem},
		{"small-entry under tcNoFD", tuning{tcNoFD: true}, calls(0, 7), k.matmulTCGroupedRing[1], tcSmemRing},
		{"FP16 activations, fragment-direct", tuning{tcA16: true}, calls(0, 62, 66), k.matmulTCGroupedA16[0], tcSmemFD},
		{"FP16 activations, small-entry", tuning{tcA16: true}, calls(0, 7, 9, 1), k.matmulTCGroupedA16[1], tcSmemFD16},
		{"FP16 activations over the three stages", tuning{tcA16: true, tcFD16S3: true}, calls(0, 7), k.matmulTCGroupedA16[1], tcSmemFD16},
		{"FP16 activations over 64 an expert: no ring", tuning{tcA16: true}, calls(0, 70, 60), k.matmulTCGroupedA16[0], tcSmemFD},
		{"row-shift FP16 over 64 an expert: no ring", tuning{tcA16Row: true}, calls(0, 170, 160), k.matmulTCGroupedA16R[0], tcSmemFD},
		{"FP16 activations need the pre-split", tuning{tcA16: true, tcNoPreSplit: true}, calls(0, 7), k.matmulTCGroupedRing[0], tcSmemRing},
		{"row-shift FP16, fragment-direct", tuning{tcA16Row: true, tcA16: true}, calls(0, 62, 66), k.matmulTCGroupedA16R[0], tcSmemFD},
		{"row-shift FP16, small-entry", tuning{tcA16Row: true}, calls(0, 7, 9, 1), k.matmulTCGroupedA16R[1], tcSmemFD16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			withTuning(t, be, tc.tn)
			fn, smem := be.tcGroupedKernel(tc.calls)
			if fn != tc.want || smem != tc.smem {
				t.Errorf("kernel %v with %d B, want %v with %d B", fn, smem, tc.want, tc.smem)
			}
		})
	}
}

// TestTCDenseBurstChoice: the split-K projections run the burst twin
// where a block's share is at least tcBurstMinChunks chunks (the split
// count tcSplit gives for T, rows and cols), the columns a multiple of 8
// and the matrix 16-byte aligned, and never under tuning.tcNoBurst or
// without the pre-split.
func TestTCDenseBurstChoice(t *testing.T) {
	be := testBE
	for _, tc := range []struct {
		name          string
		tn            tuning
		T, rows, cols int
		mat           cu.DevicePtr
		want          bool
	}{
		{"2048x2048 at 64 tokens: 16 splits of 4 chunks", tuning{}, 64, 2048, 2048, 0, false},
		{"2048x2048 at 16 tokens: 16 splits of 4 chunks", tuning{}, 16, 2048, 2048, 0, false},
		{"2048x2048 at 70 tokens: 9 splits of 8 chunks", tuning{}, 70, 2048, 2048, 0, true},
		{"2048x2048 at 512 tokens: 3 splits of 22 chunks", tuning{}, 512, 2048, 2048, 0, true},
		{"Qwen's shared down at 64 tokens: 17 splits of 11 chunks", tuning{}, 64, 2048, 5632, 0, true},
		{"tcNoBurst", tuning{tcNoBurst: true}, 512, 2048, 2048, 0, false},
		{"in-kernel split", tuning{tcNoPreSplit: true}, 512, 2048, 2048, 0, false},
		{"columns not a multiple of 8", tuning{}, 512, 2048, 2044, 0, false},
		{"matrix not 16-byte aligned", tuning{}, 512, 2048, 2048, 8, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			withTuning(t, be, tc.tn)
			ks := be.tcSplit(tc.T, tc.rows, tc.cols)
			if got := be.tcDenseBurst(tc.mat, tc.cols, ks); got != tc.want {
				t.Fatalf("T %d, %dx%d, %d splits: burst %v, want %v", tc.T, tc.rows, tc.cols, ks, got, tc.want)
			}
		})
	}
}

// tcGateRecord is an expert record on the test backend whose gate is a
// random rows x cols matrix in scheme (the layout's other matrices zero).
func tcGateRecord(t *testing.T, rng *rand.Rand, layout qpack.RecordLayout, scheme qpack.Scheme, rows, cols int) backend.Tensor {
	t.Helper()
	m := layout.Gate
	rec := make([]byte, layout.Size)
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(rng.NormFloat64() * 0.05)
	}
	var err error
	if scheme == qpack.SchemeInt4 {
		_, err = qpack.QuantizeMatrix(rec[m.Offset:m.Offset+m.Bytes], w, rows, cols)
	} else {
		_, err = qpack.EncodeFP16Matrix(rec[m.Offset:m.Offset+m.Bytes], w)
	}
	if err != nil {
		t.Fatal(err)
	}
	return mustBytes(t, testBE, rec)
}

// relRMS is the RMS of got - want over the RMS of want.
func relRMS(got, want []float32) float64 {
	var d, w float64
	for i := range want {
		e := float64(got[i]) - float64(want[i])
		d += e * e
		w += float64(want[i]) * float64(want[i])
	}
	return math.Sqrt(d / w)
}

// benchPromptIDs is a benchmark's prompt of n tokens: ids 100 + 7919i mod
// 30000 (spread over the vocabulary, so a synthetic router spreads them over
// the experts), or, with HORIZON_BENCH_PROMPT_IDS naming a file of token
// ids (separated by commas or white space), those ids repeated and cut to
// n. The contracts' prompts on the synthetic checkpoints are byte-level
// text (ids 32..126), which a synthetic router sends to fewer experts, more
// tokens each: results/h100-s36/p01-astronomy-ids.txt is PERF-REAL-v1's
// first prompt, to time what an edition's TTFT times.
func benchPromptIDs(b *testing.B, n, vocab int) []int {
	ids := make([]int, n)
	path := os.Getenv("HORIZON_BENCH_PROMPT_IDS")
	if path == "" {
		for i := range ids {
			ids[i] = 100 + (i*7919)%30000
		}
		return ids
	}
	text, err := os.ReadFile(path)
	if err != nil {
		b.Fatalf("HORIZON_BENCH_PROMPT_IDS: %v", err)
	}
	var src []int
	for _, f := range strings.FieldsFunc(string(text), func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) {
		id, err := strconv.Atoi(f)
		if err != nil || id < 0 || id >= vocab {
			b.Fatalf("HORIZON_BENCH_PROMPT_IDS %s: %q is not a token id of a %d-token vocabulary", path, f, vocab)
		}
		src = append(src, id)
	}
	if len(src) == 0 {
		b.Fatalf("HORIZON_BENCH_PROMPT_IDS %s: no token ids", path)
	}
	for i := range ids {
		ids[i] = src[i%len(src)]
	}
	return ids
}

// denseModeActivations is the dense activations BenchmarkPrefillModes'
// mode name declares: fp16 for the modes ending in "d" after a16r
// (batched-tc-a16rd), else the default.
func denseModeActivations(mode string) string {
	if strings.HasSuffix(mode, "-a16rd") {
		return engine.ExpertActFP16
	}
	return ""
}
