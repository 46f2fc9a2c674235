//go:build cuda

package cuda

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/engine"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// TestBatchedPrefillOnDevice: on the GPU a batched prefill on the row
// kernels (tuning.noMatmulTC; the tensor cores are TestBatchedPrefillTensorCores')
// (the prompt's projections as MatMuls, the routed experts expert by expert through
// ExpertMatMul) gives token-at-a-time prefill's tokens and the bits of its
// logits, op by op and before every captured step mode (which then start
// from the KV cache the batches filled), at full and partial capacity, for
// both tiny models and expert formats; a prompt longer than PrefillChunk
// runs as two batches; and the batched prefill is timed on the host, within
// the TTFT. Auto runs batched on this backend (BatchedDefault; token at a
// time under HORIZON_TEST_BATCHED_DEFAULT=0).
func TestBatchedPrefillOnDevice(t *testing.T) {
	withTuning(t, testBE, tuning{noMatmulTC: true}) // the row kernels: token at a time's bits
	long := strings.Repeat("Batches carry the KV cache from one to the next. ", 13)[:engine.PrefillChunk+40]
	for _, arch := range []string{"olmoe-tiny", "qwen2moe-tiny"} {
		for _, scheme := range []qpack.Scheme{qpack.SchemeInt4, qpack.SchemeFP16} {
			art := testArtifact(t, arch, scheme)
			cfg, err := art.Config()
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []int{cfg.NumExperts, cfg.TopK + 2} {
				modes := []string{engine.StepOps, engine.StepGraphFull, engine.StepPersistent}
				if c < cfg.NumExperts {
					modes = []string{engine.StepOps, engine.StepGraphSegmented, engine.StepGraphWait}
				}
				for _, mode := range modes {
					t.Run(fmt.Sprintf("%s/%s/c%d/%s", arch, scheme, c, mode), func(t *testing.T) {
						o := engine.LoadOptions{Executor: "grouped-v1", Capacity: c, StepMode: mode, Prefill: engine.PrefillToken}
						tok := loadEngine(t, art, o)
						if got := tok.PrefillMode(); got != engine.PrefillToken {
							t.Fatalf("prefill token runs %s", got)
						}
						o.Prefill = engine.PrefillAuto
						wantAuto := engine.PrefillToken
						if batchedDefault { // unless HORIZON_TEST_BATCHED_DEFAULT=0
							wantAuto = engine.PrefillBatched
						}
						if got := loadEngine(t, art, o).PrefillMode(); got != wantAuto {
							t.Fatalf("auto prefill on cuda is %s, want %s", got, wantAuto)
						}
						o.Prefill = engine.PrefillBatched
						bat := loadEngine(t, art, o)
						if got := bat.PrefillMode(); got != engine.PrefillBatched {
							t.Fatalf("prefill batched runs %s", got)
						}
						if !bat.TimesPrefill() {
							t.Fatal("a batched prefill on cuda is not timed")
						}
						prompts := []string{"A", "Batched prefill, the same bits.", "A second request after a lookahead step."}
						if c == cfg.NumExperts && mode == engine.StepGraphFull && scheme == qpack.SchemeInt4 {
							prompts = append(prompts, long)
						}
						for _, p := range prompts {
							req := engine.Request{Prompt: promptIDs(p), Tokens: 12, SuppressEOS: true, LogitSteps: 4}
							want, err := tok.Generate(req)
							if err != nil {
								t.Fatal(err)
							}
							got, err := bat.Generate(req)
							if err != nil {
								t.Fatalf("%d-token prompt: %v", len(req.Prompt), err)
							}
							sameResult(t, fmt.Sprintf("%d-token prompt, token at a time", len(req.Prompt)), got, want)
							if !got.PrefillTimed || got.PrefillSeconds <= 0 || got.PrefillSeconds > got.TTFTSeconds {
								t.Fatalf("%d-token prompt: prefill %v s (timed %v), TTFT %v s", len(req.Prompt), got.PrefillSeconds, got.PrefillTimed, got.TTFTSeconds)
							}
							// Lookahead (no logits read) on the same engine.
							req.LogitSteps = 0
							if got, err = bat.Generate(req); err != nil {
								t.Fatal(err)
							}
							sameResult(t, "with lookahead", engine.Result{Tokens: got.Tokens}, engine.Result{Tokens: want.Tokens})
						}
					})
				}
			}
		}
	}
}

// TestDeviceRoutedPrefillOnDevice: by default a batched prefill at full
// residency keeps each layer's routing on the GPU (tc_route_groups'
// tables, the leases counted a layer behind) and gives the read-back
// path's (tuning.noRouteDevice) tokens, logit bits, cache counters and
// routing trace, with the ring kernels, with the fragment-direct kernels
// (tuning.tcFDAlways, tcFDSplitK) and the small-entry build (the default where the pairs
// average at most 16 an expert, tables cut at 16 pairs an entry, on the device and on the read
// back; tuning.tcNoFD16 turns it off), and with programmatic dependent launch
// of the op-by-op kernels (the default; tuning.noPrefillPDL turns it off, also on the read back),
// with and without the fused q|k|v launch (the default; tuning.noPartsFused), and with the
// split-K projections' two-stage kernel (tuning.tcNoBurst; since e659b13 the burst twin runs only
// from 8 chunks a block, which the tiny models' 256 columns in 2 or more splits never reach, so
// here those cases run the two-stage kernel either way; TestTCPreSplitSameBits' T70 runs the
// burst twin), and with gate, up and SiLUMul as one launch where a
// fragment-direct kernel runs (the default; tuning.tcNoGateUp: three), and with the top-k a block
// a row (tuning.noTopKWarp; a warp a row by default); two chunks on the
// longest prompt. Under the FP16-activation knobs (tuning.tcA16, tcA16Row)
// the device routing matches the read back under the same knob. At partial residency the device routing changes nothing
// (no pinned snapshot): the routing is read back.
func TestDeviceRoutedPrefillOnDevice(t *testing.T) {
	long := strings.Repeat("Routing stays on the device while the host goes on. ", 12)[:engine.PrefillChunk+24]
	for _, arch := range []string{"olmoe-tiny", "qwen2moe-tiny"} {
		art := testArtifact(t, arch, qpack.SchemeInt4)
		cfg, err := art.Config()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []int{cfg.NumExperts, cfg.TopK + 2} {
			for _, mode := range []string{engine.StepOps, engine.StepGraphFull} {
				if c < cfg.NumExperts && mode == engine.StepGraphFull {
					mode = engine.StepGraphSegmented
				}
				t.Run(fmt.Sprintf("%s/c%d/%s", arch, c, mode), func(t *testing.T) {
					for _, p := range []string{"A", "Routed on the device, counted after.", long} {
						req := engine.Request{Prompt: promptIDs(p), Tokens: 8, SuppressEOS: true, LogitSteps: 3}
						run := func(tn tuning) (engine.Result, any, any, int, int) {
							withTuning(t, testBE, tn)
							l := loadEngine(t, art, engine.LoadOptions{Executor: "grouped-v1", Capacity: c, StepMode: mode,
								Prefill: engine.PrefillBatched, Trace: true})
							before, gu0 := testBE.routeLaunches, testBE.gateUpLaunches
							l.Cache.BeginRequest()
							res, err := l.Generate(req)
							if err != nil {
								t.Fatalf("%d-token prompt, %+v: %v", len(req.Prompt), tn, err)
							}
							cn, err := l.Cache.EndRequest()
							if err != nil {
								t.Fatal(err)
							}
							return res, cn, l.Cache.TakeTrace(), testBE.routeLaunches - before, testBE.gateUpLaunches - gu0
						}
						want, wc, wt, wr, _ := run(tuning{noRouteDevice: true, tcNoFD: true, noPrefillPDL: true})
						if wr != 0 {
							t.Fatalf("%d device routings read back", wr)
						}
						for _, tn := range []tuning{{}, {tcNoFD: true}, {tcFDAlways: true},
							{tcFDAlways: true, tcFDSplitK: true}, {noRouteDevice: true}, {noRouteDevice: true, noPrefillPDL: true}, {noPrefillPDL: true},
							{noPartsFused: true}, {tcFDSplitK: true, noRouteDevice: true},
							{tcNoFD16: true}, {tcNoFD16: true, noRouteDevice: true},
							{tcNoBurst: true}, {tcNoBurst: true, noPartsFused: true},
							{tcNoGateUp: true}, {tcNoGateUp: true, tcNoFD16: true}, {noTopKWarp: true}, {noTopKWarp: true, noRouteDevice: true},
							{tcFD16S3: true}, {tcFD16S3: true, noRouteDevice: true}} {
							got, gc, gt, gr, gu := run(tn)
							// A device routing's gate and up run as one launch where a
							// fragment-direct kernel takes its table (tcGroupedFD: the
							// prompt chunk's pairs average at most tcFDPairsPerExpert).
							wantGU := 0
							if c == cfg.NumExperts && !tn.noRouteDevice && !tn.tcNoGateUp && !tn.tcNoFD {
								for rest := len(req.Prompt); rest > 0; rest -= engine.PrefillChunk {
									if n := min(rest, engine.PrefillChunk); tn.tcFDAlways || n*cfg.TopK <= tcFDPairsPerExpert*cfg.NumExperts {
										wantGU += cfg.NumLayers
									}
								}
							}
							if gu != wantGU {
								t.Fatalf("%d-token prompt, %+v: %d gate|up launches, want %d", len(req.Prompt), tn, gu, wantGU)
							}
							chunks := (len(req.Prompt) + engine.PrefillChunk - 1) / engine.PrefillChunk
							if want := chunks * cfg.NumLayers; c == cfg.NumExperts && !tn.noRouteDevice && gr != want {
								t.Fatalf("%d-token prompt, %+v: %d device routings, want %d", len(req.Prompt), tn, gr, want)
							}
							if (c < cfg.NumExperts || tn.noRouteDevice) && gr != 0 {
								t.Fatalf("%d-token prompt at capacity %d: %d device routings", len(req.Prompt), c, gr)
							}
							sameResult(t, fmt.Sprintf("%d-token prompt, %+v, read back", len(req.Prompt), tn), got, want)
							if !reflect.DeepEqual(gc, wc) || !reflect.DeepEqual(gt, wt) {
								t.Fatalf("%d-token prompt, %+v: counters or trace differ from the read back's:\n%+v\n%+v", len(req.Prompt), tn, gc, wc)
							}
						}
						// The FP16-activation builds (tuning.tcA16, tcA16Row: other
						// bits than the FP32 ones, every int4 launch fragment-direct):
						// under each, the device routing (gate|up in one launch) gives
						// the read back's tokens, logits, counters and trace.
						for _, a16 := range []tuning{{tcA16: true}, {tcA16Row: true}} {
							rb := a16
							rb.noRouteDevice = true
							w16, wc16, wt16, _, _ := run(rb)
							got, gc, gt, _, _ := run(a16)
							sameResult(t, fmt.Sprintf("%d-token prompt, %+v, read back", len(req.Prompt), a16), got, w16)
							if !reflect.DeepEqual(gc, wc16) || !reflect.DeepEqual(gt, wt16) {
								t.Fatalf("%d-token prompt, %+v: counters or trace differ from the read back's:\n%+v\n%+v", len(req.Prompt), a16, gc, wc16)
							}
						}
					}
				})
			}
		}
	}
}

// TestAttnInRowsOnDevice: a batched prefill's q/k norms, RoPE and KV append
// in one launch (QKRoPEKVRows: qk_norm_rope_kv_rows on OLMoE's shape,
// rope_kv_rows on Qwen1.5-MoE's; the default) give the separate ops' tokens
// and logits bit for bit (tuning.noAttnInRows), over an FP32 and an FP16 KV
// cache, on the row kernels and on the tensor cores, a prompt of two
// chunks included (its 512-row chunk runs the separate ops inside
// QKRoPEKVRows on OLMoE's shape: qkNormRowsMax), at full and partial capacity.
func TestAttnInRowsOnDevice(t *testing.T) {
	long := strings.Repeat("Norms, rotations and the cache in one launch. ", 12)[:engine.PrefillChunk+17]
	for _, arch := range []string{"olmoe-tiny", "qwen2moe-tiny"} {
		art := testArtifact(t, arch, qpack.SchemeInt4)
		cfg, err := art.Config()
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range []string{"fp32", "fp16"} {
			for _, c := range []int{cfg.NumExperts, cfg.TopK + 2} {
				for _, base := range []tuning{{}, {noMatmulTC: true}} {
					t.Run(fmt.Sprintf("%s/%s/c%d/rows%v", arch, kv, c, base.noMatmulTC), func(t *testing.T) {
						for _, p := range []string{"A", "The cache is filled in one launch a layer.", long} {
							req := engine.Request{Prompt: promptIDs(p), Tokens: 6, SuppressEOS: true, LogitSteps: 2}
							run := func(tn tuning) engine.Result {
								withTuning(t, testBE, tn)
								return generate(t, testBE, testBE.ExpertRows(), art, engine.LoadOptions{Executor: "grouped-v1", Capacity: c,
									StepMode: engine.StepOps, KV: kv, Prefill: engine.PrefillBatched}, req)
							}
							off := base
							off.noAttnInRows = true
							want := run(off)
							n0 := backendCount(t, func(b *Backend) int { return b.attnInRowsLaunches })
							got := run(base)
							if n := backendCount(t, func(b *Backend) int { return b.attnInRowsLaunches }) - n0; n < cfg.NumLayers {
								t.Fatalf("%d-token prompt: %d QKRoPEKVRows launches, want one a layer a chunk", len(req.Prompt), n)
							}
							sameResult(t, fmt.Sprintf("%d-token prompt, the separate ops", len(req.Prompt)), got, want)
						}
					})
				}
			}
		}
	}
}
