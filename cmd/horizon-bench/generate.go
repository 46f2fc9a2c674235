package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/horizon-runmap/horizon/editions"
	"github.com/horizon-runmap/horizon/runtime/cache"
	"github.com/horizon-runmap/horizon/runtime/device"
	"github.com/horizon-runmap/horizon/runtime/engine"
	"github.com/horizon-runmap/horizon/runtime/executor"
	"github.com/horizon-runmap/horizon/runtime/model"
	"github.com/horizon-runmap/horizon/runtime/observe"
	"github.com/horizon-runmap/horizon/runtime/qpack"
	"github.com/horizon-runmap/horizon/runtime/tokenizer"
)

// defaultArch and defaultSeed name the embedded default model: a tiny
// synthetic OLMoE that generate builds on the fly when no --artifact is given.
const (
	defaultArch = "olmoe-tiny"
	defaultSeed = 1
)

func generateCommand() *cli.Command {
	return &cli.Command{
		Name:      "generate",
		Usage:     "greedy generation from a prepared artifact (or the embedded tiny default)",
		UsageText: "horizon-bench generate [--artifact DIR | --arch NAME --seed N] --prompt TEXT [--tokens N] [--prefetch off|next-layer] [--overlap off|hit-compute] [--kv fp32|fp16] [--json]",
		Description: `Runs prefill and greedy decode with EOS suppressed (EOS logits masked, so exactly
--tokens tokens come out) and prints the text, the token ids and the timings:
TTFT (admission to first token), prefill (admission to the prompt's last
logits, before the first selection: timed on the CPU backend, by device events
in CUDA's captured steps, and on the host after a batched prefill; UNKNOWN op by
op on CUDA token at a time), decode seconds (first to last token) and
decode tok/s = (N-1) / decode seconds.

Without --artifact it synthesises --arch/--seed (default olmoe-tiny, seed 1),
prepares it with INT4 experts into a temporary directory and runs that. A
synthetic checkpoint's weights are random (deterministic per seed), so its text
is meaningless: generate says so in one line on stderr (never in --json's
stdout); the token ids, timings and cache counters are what it measures.

Routed experts live in a budgeted per-layer cache (resident-qpacked-cache-v1):
--capacity experts per layer are published rows, the rest are copied in from
the read-only host authority on a miss and evicted by --policy. Capacity never
changes tokens, only transfers. --transport registered page-locks the host
authority once and copies misses from it directly instead of through the
pinned staging ring (staged, the default). --prefetch next-layer runs layer
L+1's router on layer L's input and loads the predicted misses while layer L
computes (speculation: tokens and logits never change; it runs op by op, so
--step-mode auto becomes ops); the output then gives the prediction's
precision (predicted experts the routing used) and recall (routed experts
that were predicted). --overlap hit-compute computes each layer's resident
experts' gate/up while its missed experts copy (tokens never change); it
runs only in graph-segmented steps: --device cuda, --capacity below the
expert count, --step-mode auto or graph-segmented, and --prefetch off.

--kv picks the KV cache's element type: fp32 (the default) or fp16 (K and V
rounded to binary16 when stored and read back as FP32: half the bytes a decode
step reads at depth; tokens may differ from fp32's). The persistent step mode
reads an FP32 cache only, so --kv fp16 with --step-mode persistent is a usage
error. Campaign configurations declare the same kv:, and raw records state it
in artifact.kv_dtype. For example:

    horizon-bench generate --prompt "The quick brown fox" --tokens 32 --kv fp16 --json

--expert-activations and --dense-activations pick the dtype a batched
prefill's INT4 expert matmuls and its dense FP16 projections (attention q, k,
v, o; the shared expert's gate, up and down) take their activations in: fp32
(the default) or fp16 (logits and tokens may differ from fp32's; decode, the
router and the head stay FP32). fp16 needs a batched prefill (not --prefill
token or --prefetch next-layer), and --expert-activations fp16 INT4 experts;
--dense-activations fp16 works with either expert format. Campaign
configurations declare the same expert_activations: and dense_activations:,
and raw records state FP16 in artifact.expert_activation_dtype and
artifact.dense_activation_dtype.

--json prints one object with at least token_ids, ttft_seconds,
prefill_seconds, decode_seconds, decode_tok_s, and under "cache" the request's counters
(hits, misses, evictions, h2d_bytes, h2d_copies, d2h_expert_bytes, ...),
kv_dtype, expert_activation_dtype and dense_activation_dtype (FP32 or FP16,
as raw records spell them).`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "artifact", Usage: "prepared artifact `DIR` (from horizon-bench prepare)"},
			&cli.StringFlag{Name: "arch", Value: defaultArch, Usage: "synthetic architecture to build when --artifact is not given"},
			&cli.Uint64Flag{Name: "seed", Value: defaultSeed, Usage: "synthetic seed when --artifact is not given"},
			&cli.StringFlag{Name: "experts", Value: "int4", Usage: "expert format of the on-the-fly artifact: int4 or fp16"},
			&cli.StringFlag{Name: "prompt", Value: "The quick brown fox", Usage: "prompt text"},
			&cli.StringFlag{Name: "prompt-ids", Usage: "comma-separated prompt token ids (instead of --prompt)"},
			&cli.IntFlag{Name: "tokens", Value: 32, Usage: "output tokens N"},
			&cli.IntFlag{Name: "max-context", DefaultText: "prompt + tokens", Usage: "KV-cache length in positions (at most the model's max_position_embeddings)"},
			&cli.BoolFlag{Name: "stop-at-eos", Usage: "stop at EOS instead of suppressing it"},
			&cli.StringFlag{Name: "device", Value: "cpu", Usage: "cpu or cuda"},
			&cli.IntFlag{Name: "threads", Usage: "CPU worker goroutines per op (0: all cores)"},
			&cli.StringFlag{Name: "executor", Value: "scalar-v1", Usage: "routed-expert executor: " + strings.Join(executor.Names(), ", ")},
			&cli.IntFlag{Name: "capacity", Usage: "published expert rows per layer, top-k..experts (0: every expert, full residency)"},
			&cli.StringFlag{Name: "placement", Value: cache.DefaultPlacement, Usage: "initial placement: " + strings.Join(cache.Placements(), ", ")},
			&cli.StringFlag{Name: "policy", Value: cache.DefaultPolicy, Usage: "eviction policy: " + strings.Join(cache.Policies(), ", ")},
			&cli.StringFlag{Name: "transport", Value: cache.DefaultTransport, Usage: "miss copy path: " + strings.Join(cache.Transports(), ", ") + " (registered page-locks the host authority and copies from it without staging)"},
			&cli.StringFlag{Name: "prefetch", Value: engine.PrefetchOff, Usage: "speculative expert prefetch: " + strings.Join(engine.PrefetchModes(), ", ") + " (next-layer predicts layer L+1's experts from layer L's input; op-by-op steps only)"},
			&cli.StringFlag{Name: "overlap", Value: engine.OverlapOff, Usage: "miss/hit overlap: " + strings.Join(engine.OverlapModes(), ", ") + " (hit-compute computes a layer's resident experts while its misses copy; needs --device cuda, partial residency (--capacity below the expert count), --step-mode auto or graph-segmented, and --prefetch off)"},
			&cli.StringFlag{Name: "step-mode", Value: "auto", Usage: "how steps are issued: auto (captured device steps where the backend has them: on cuda graph-full at full residency, graph-segmented otherwise; op by op on the cpu), ops (every op from the host), graph-full, graph-segmented, graph-wait or persistent (one launch of the persistent decode kernel per step, full residency) (cuda only; see README)"},
			&cli.StringFlag{Name: "prefill", Value: engine.PrefillAuto, Usage: "how the prompt runs: " + strings.Join(engine.PrefillModes(), ", ") + " (auto: batched without --prefetch, token at a time with it; batched reads each weight row once per batch of positions: on the cpu token at a time's logits bit for bit, on cuda the tensor cores' sums, within the HF oracle's tolerance, with the same tokens across capacities and step modes)"},
			&cli.StringFlag{Name: "kv", Value: "fp32", Usage: "KV cache element type: " + strings.Join(kvNames(), ", ") + " (fp16 halves the bytes a decode step reads at depth; not with --step-mode persistent)"},
			&cli.StringFlag{Name: "expert-activations", Value: engine.ExpertActFP32, Usage: "the dtype a batched prefill's INT4 expert matmuls take their activations in: " + strings.Join(engine.ExpertActivationNames(), ", ") + " (fp16: each token row rounded to FP16 at one power-of-two shift, W4A16, FP32 sums; other logits than fp32's; decode stays FP32; needs INT4 experts and batched prefill)"},
			&cli.StringFlag{Name: "dense-activations", Value: engine.ExpertActFP32, Usage: "the dtype a batched prefill's dense FP16 projections (attention q, k, v, o; the shared expert's gate, up and down) take their activations in: " + strings.Join(engine.DenseActivationNames(), ", ") + " (fp16: each row rounded to FP16 at one power-of-two shift a 32-value chunk, FP32 sums; other logits than fp32's; decode, the router and the head stay FP32; needs batched prefill, either expert format)"},
			&cli.StringFlag{Name: "logits-out", Usage: "write the logits of the first --logit-steps selections as little-endian float32 [steps, V] to this file"},
			&cli.IntFlag{Name: "logit-steps", Value: 1, Usage: "how many selections' logits --logits-out keeps"},
			&cli.BoolFlag{Name: "json", Usage: "print a JSON object instead of text"},
		},
		Action: runGenerate,
	}
}

// generateOutput is the --json document; scripts rely on these names.
type generateOutput struct {
	Schema        string  `json:"schema"`
	Version       int     `json:"version"`
	Model         string  `json:"model"`
	Artifact      string  `json:"artifact_sha256"`
	ExpertScheme  string  `json:"expert_scheme"`
	Backend       string  `json:"backend"`
	Executor      string  `json:"executor"`
	PromptIDs     []int   `json:"prompt_ids"`
	TokenIDs      []int   `json:"token_ids"`
	Text          string  `json:"text"`
	TokenNs       []int64 `json:"token_ns"`
	TTFTSeconds   float64 `json:"ttft_seconds"`
	DecodeSeconds float64 `json:"decode_seconds"`
	// DecodeTokS is (N-1) / decode_seconds; UNKNOWN with one token (no
	// decode interval), never 0.
	DecodeTokS     editions.Obs[float64] `json:"decode_tok_s"`
	RuntimeSeconds float64               `json:"runtime_seconds"`
	// PrefillSeconds is admission to the prompt's last logits before the
	// first selection (a number, or UNKNOWN on a backend that runs
	// asynchronously: CUDA).
	PrefillSeconds editions.Obs[float64] `json:"prefill_seconds"`
	Capacity       int                   `json:"capacity"`
	Experts        int                   `json:"experts_per_layer"`
	Placement      string                `json:"placement"`
	Policy         string                `json:"policy"`
	Transport      string                `json:"transport"`
	StepMode       string                `json:"step_mode"`
	Prefetch       string                `json:"prefetch"`
	// Prefill is how the prompt ran: token or batched.
	Prefill string `json:"prefill"`
	// Overlap is the miss/hit overlap mode in force: off or hit-compute.
	Overlap string `json:"overlap"`
	// KVDType is the KV cache's element type: FP32 or FP16 (raw records'
	// artifact.kv_dtype).
	KVDType string `json:"kv_dtype"`
	// ExpertActivationDType is what a batched prefill's INT4 expert
	// matmuls take their activations in: FP32 or FP16 (raw records'
	// artifact.expert_activation_dtype).
	ExpertActivationDType string `json:"expert_activation_dtype"`
	// DenseActivationDType is what a batched prefill's dense FP16
	// projections take their activations in: FP32 or FP16 (raw records'
	// artifact.dense_activation_dtype).
	DenseActivationDType string `json:"dense_activation_dtype"`
	// OverlapSplitLayers and OverlapEarlyExperts count, with overlap on,
	// the layer steps whose group mixed hits and misses and the hit
	// experts whose gate/up ran while the misses copied (the whole
	// command, prefill included); absent with overlap off.
	OverlapSplitLayers  *int64 `json:"overlap_split_layers,omitempty"`
	OverlapEarlyExperts *int64 `json:"overlap_early_experts,omitempty"`
	// PrefetchPrecision and PrefetchRecall score the next-layer prediction
	// (cache prefetch_overlap over prefetch_predicted / prefetch_routed);
	// absent when nothing was predicted.
	PrefetchPrecision *float64       `json:"prefetch_precision,omitempty"`
	PrefetchRecall    *float64       `json:"prefetch_recall,omitempty"`
	Cache             cache.Counters `json:"cache"`
	// VRAM peaks over the whole command (device load included) from the
	// NVML sampler on cuda: "UNSUPPORTED" on the cpu device, "UNKNOWN" when
	// NVML gave no reading (process: when the driver did not list it).
	VRAMPeakBytes        editions.Obs[int64] `json:"vram_peak_bytes"`
	VRAMProcessPeakBytes editions.Obs[int64] `json:"vram_process_peak_bytes"`
}

func runGenerate(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageError("generate takes no arguments, got %q", c.Args().Slice())
	}
	if c.Int("tokens") <= 0 {
		return usageError("--tokens must be positive")
	}
	if m := c.String("step-mode"); !slices.Contains(engine.StepModes(), m) {
		return usageError("--step-mode %q: want one of %v", m, engine.StepModes())
	}
	if _, err := engine.ParsePrefetch(c.String("prefetch")); err != nil {
		return usageError("--%v", err)
	}
	if _, err := engine.ParseOverlap(c.String("overlap")); err != nil {
		return usageError("--%v", err)
	}
	if _, err := engine.ParsePrefill(c.String("prefill")); err != nil {
		return usageError("--%v", err)
	}
	if _, err := engine.ParseKVDType(c.String("kv")); err != nil {
		return usageError("--kv: %v", err)
	}
	if _, err := engine.ParseExpertActivations(c.String("expert-activations")); err != nil {
		return usageError("--expert-activations: %v", err)
	}
	if c.String("expert-activations") == engine.ExpertActFP16 && (c.String("prefill") == engine.PrefillToken || c.String("prefetch") != engine.PrefetchOff) {
		return usageError("--expert-activations fp16 applies to a batched prefill's expert matmuls; --prefill token and --prefetch next-layer prefill token at a time")
	}
	if _, err := engine.ParseDenseActivations(c.String("dense-activations")); err != nil {
		return usageError("--dense-activations: %v", err)
	}
	if c.String("dense-activations") == engine.ExpertActFP16 && (c.String("prefill") == engine.PrefillToken || c.String("prefetch") != engine.PrefetchOff) {
		return usageError("--dense-activations fp16 applies to a batched prefill's dense projections; --prefill token and --prefetch next-layer prefill token at a time")
	}
	if c.String("kv") == "fp16" && c.String("step-mode") == engine.StepPersistent {
		return usageError("--kv fp16 with --step-mode %s: the persistent kernel reads an FP32 KV cache only; use --kv fp32 or another step mode", engine.StepPersistent)
	}
	dir := c.String("artifact")
	if dir == "" {
		tmp, err := os.MkdirTemp("", "horizon-default-")
		if err != nil {
			return fmt.Errorf("temporary directory for the default model: %w", err)
		}
		defer os.RemoveAll(tmp)
		scheme, err := expertScheme(c.String("experts"))
		if err != nil {
			return err
		}
		ckpt := filepath.Join(tmp, "checkpoint")
		if _, err := model.Synthesize(model.SynthOptions{Arch: c.String("arch"), Seed: c.Uint64("seed"), OutDir: ckpt}); err != nil {
			return fmt.Errorf("synthesise %s: %w", c.String("arch"), err)
		}
		dir = filepath.Join(tmp, "artifact")
		if _, err := qpack.Prepare(qpack.PrepareOptions{Checkpoint: ckpt, Out: dir, Scheme: scheme}); err != nil {
			return fmt.Errorf("prepare %s: %w", c.String("arch"), err)
		}
	}
	art, err := qpack.Open(dir)
	if err != nil {
		return fmt.Errorf("open artifact: %w", err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return fmt.Errorf("load tokenizer: %w", err)
	}
	if note, ok := synthNote(art); ok {
		fmt.Fprintln(c.App.ErrWriter, note)
	}
	var prompt []int
	if s := c.String("prompt-ids"); s != "" {
		if prompt, err = parseIDs(s); err != nil {
			return usageError("--prompt-ids: %v", err)
		}
	} else if prompt, err = tok.Encode(c.String("prompt")); err != nil {
		return fmt.Errorf("encode prompt: %w", err)
	}
	vramPeak, vramProc := editions.UnsupportedObs[int64](), editions.UnsupportedObs[int64]()
	var sampler observe.VRAMSampler
	if c.String("device") == "cuda" {
		vramPeak, vramProc = editions.UnknownObs[int64](), editions.UnknownObs[int64]()
		if sampler, err = observe.StartVRAM(0, observe.DefaultVRAMInterval); err != nil {
			fmt.Fprintf(c.App.ErrWriter, "generate: VRAM will be UNKNOWN: %v\n", err)
			sampler = nil
		}
	}
	dev, err := openDevice(c.String("device"), c.Int("threads"))
	if err != nil {
		return err
	}
	defer dev.Close()
	if hint := cpuDefaultHint(c.IsSet("device"), c.String("device"), device.Registered("cuda")); hint != "" {
		fmt.Fprintln(c.App.ErrWriter, hint)
	}
	be := dev.Backend
	// The KV cache holds the request (prompt + tokens) unless --max-context
	// asks for more; the engine refuses more than the model's
	// max_position_embeddings.
	maxSeq := len(prompt) + c.Int("tokens")
	if n := c.Int("max-context"); n != 0 {
		if n < maxSeq {
			return usageError("--max-context %d: the prompt (%d tokens) and --tokens %d need %d positions", n, len(prompt), c.Int("tokens"), maxSeq)
		}
		maxSeq = n
	}
	if mp := cfgMaxPositions(art); mp > 0 && maxSeq > mp {
		return usageError("the prompt (%d tokens) and --tokens %d need %d positions; the model holds %d (max_position_embeddings)", len(prompt), c.Int("tokens"), maxSeq, mp)
	}
	eng, err := engine.Load(be, dev.Rows, art, engine.LoadOptions{
		MaxSeq:   maxSeq,
		Executor: c.String("executor"), Capacity: c.Int("capacity"),
		Placement: c.String("placement"), Policy: c.String("policy"), Transport: c.String("transport"), StepMode: c.String("step-mode"),
		Prefetch: c.String("prefetch"), Overlap: c.String("overlap"), Prefill: c.String("prefill"), KV: c.String("kv"),
		ExpertActivations: c.String("expert-activations"), DenseActivations: c.String("dense-activations"),
	})
	if err != nil {
		return fmt.Errorf("load model: %w", err)
	}
	defer eng.Close()
	req := engine.Request{Prompt: prompt, Tokens: c.Int("tokens"), SuppressEOS: !c.Bool("stop-at-eos")}
	if c.String("logits-out") != "" {
		req.LogitSteps = c.Int("logit-steps")
	}
	eng.Cache.BeginRequest()
	res, err := eng.Generate(req)
	if err != nil {
		return err
	}
	counters, err := eng.Cache.EndRequest()
	if err != nil {
		return err
	}
	opts := eng.Cache.Options()
	if p := c.String("logits-out"); p != "" {
		if err := writeLogits(p, res.Logits); err != nil {
			return err
		}
	}
	if sampler != nil {
		if r, err := sampler.Stop(); err == nil {
			vramPeak = editions.Observed(r.DevicePeak)
			if r.ProcessPeak >= 0 {
				vramProc = editions.Observed(r.ProcessPeak)
			}
		}
	}
	out := generateOutput{
		Schema: "horizon.generate", Version: 1,
		Model: eng.Config().ModelType, Artifact: art.Meta.ArtifactSHA256, ExpertScheme: string(art.Layout().Scheme),
		Backend: be.Name(), Executor: eng.ExecutorName(),
		PromptIDs: prompt, TokenIDs: res.Tokens, Text: tok.Decode(res.Tokens), TokenNs: res.TokenNs,
		TTFTSeconds: res.TTFTSeconds, DecodeSeconds: res.DecodeSeconds, DecodeTokS: decodeRate(res),
		RuntimeSeconds: res.RuntimeSeconds,
		Capacity:       opts.Capacity, Experts: eng.Config().NumExperts, Placement: opts.Placement, Policy: opts.Policy,
		Transport: opts.Transport, StepMode: eng.StepMode(), Prefetch: eng.PrefetchMode(), Prefill: eng.PrefillMode(), Overlap: eng.OverlapMode(), KVDType: eng.KVName(), ExpertActivationDType: eng.ExpertActivationName(), DenseActivationDType: eng.DenseActivationName(), Cache: counters,
		VRAMPeakBytes: vramPeak, VRAMProcessPeakBytes: vramProc,
	}
	out.PrefillSeconds = editions.UnknownObs[float64]()
	if res.PrefillTimed {
		out.PrefillSeconds = editions.Observed(res.PrefillSeconds)
	}
	if split, early, ok := eng.OverlapCounts(); ok {
		out.OverlapSplitLayers, out.OverlapEarlyExperts = &split, &early
	}
	if p, ok := counters.PrefetchPrecision(); ok {
		out.PrefetchPrecision = &p
	}
	if r, ok := counters.PrefetchRecall(); ok {
		out.PrefetchRecall = &r
	}
	if c.Bool("json") {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	w := c.App.Writer
	fmt.Fprintf(w, "%s\n\n", out.Text)
	fmt.Fprintf(w, "model      %s (%s experts, %s executor, %s backend)\n", out.Model, out.ExpertScheme, out.Executor, out.Backend)
	fmt.Fprintf(w, "prompt ids %v\n", out.PromptIDs)
	fmt.Fprintf(w, "token ids  %v\n", out.TokenIDs)
	fmt.Fprintf(w, "TTFT       %.3f ms\n", out.TTFTSeconds*1e3)
	if p := out.PrefillSeconds; p.Ok() {
		fmt.Fprintf(w, "prefill    %.3f ms (%d prompt tokens, %.1f tok/s; admission to the last prompt logits)\n", p.Value*1e3, len(out.PromptIDs), float64(len(out.PromptIDs))/p.Value)
	} else {
		fmt.Fprintf(w, "prefill    %s (the %s backend runs asynchronously; TTFT includes it)\n", p.Status, out.Backend)
	}
	fmt.Fprintf(w, "residency  %d/%d experts per layer (%s placement, %s eviction, %s transport)\n", out.Capacity, out.Experts, out.Placement, out.Policy, out.Transport)
	fmt.Fprintf(w, "kv cache   %s (%d positions)\n", out.KVDType, eng.MaxSeq())
	if out.ExpertActivationDType != "FP32" {
		fmt.Fprintf(w, "experts    %s activations in the batched prefill's matmuls (one shift a token row; decode FP32)\n", out.ExpertActivationDType)
	}
	if out.DenseActivationDType != "FP32" {
		fmt.Fprintf(w, "dense      %s activations in the batched prefill's projections (one shift a 32-value chunk; decode, router and head FP32)\n", out.DenseActivationDType)
	}
	if out.Overlap != engine.OverlapOff {
		fmt.Fprintf(w, "overlap    %s (%s steps: resident experts computed while the misses copy)", out.Overlap, out.StepMode)
		if out.OverlapSplitLayers != nil {
			fmt.Fprintf(w, ": %d layer steps split, %d hit experts computed early", *out.OverlapSplitLayers, *out.OverlapEarlyExperts)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "cache      %d hits, %d misses, %d evictions, %d H2D bytes, %d expert D2H bytes\n",
		counters.Hits, counters.Misses, counters.Evictions, counters.H2DBytes, counters.D2HExpertBytes)
	if out.Prefetch != engine.PrefetchOff {
		fmt.Fprintf(w, "prefetch   %s: %d predicted experts not resident, %d loaded, %d used by the routing, %d H2D bytes\n",
			out.Prefetch, counters.PrefetchIssued, counters.PrefetchLoaded, counters.PrefetchUsed, counters.PrefetchH2DBytes)
		if out.PrefetchPrecision != nil && out.PrefetchRecall != nil {
			fmt.Fprintf(w, "prediction precision %.3f, recall %.3f over %d routed groups (%d of %d predicted experts routed)\n",
				*out.PrefetchPrecision, *out.PrefetchRecall, counters.PrefetchGroups, counters.PrefetchOverlap, counters.PrefetchPredicted)
		}
	}
	if r := out.DecodeTokS; r.Ok() {
		fmt.Fprintf(w, "decode     %.3f s for %d tokens = %.1f tok/s\n", out.DecodeSeconds, len(out.TokenIDs)-1, r.Value)
	} else {
		fmt.Fprintf(w, "decode     %s (one token: no decode interval)\n", r.Status)
	}
	fmt.Fprintf(w, "VRAM peak  device %s, process %s (bytes, NVML over the whole command)\n", obsText(out.VRAMPeakBytes), obsText(out.VRAMProcessPeakBytes))
	return nil
}

// synthNote is the one stderr line generate prints before running an
// artifact prepared from a synthetic checkpoint (horizon-bench synth, or
// the embedded default): its weights are deterministic random numbers, so
// the text says nothing about the model, only the token ids, timings and
// cache counters mean something. ok is false for a real checkpoint. The
// artifact records the recipe in its identity (source.synthetic, the
// checkpoint's horizon-synth.json; null for a real checkpoint).
func synthNote(art *qpack.Artifact) (string, bool) {
	raw := bytes.TrimSpace(art.Meta.Identity.Source.Synthetic)
	if len(raw) == 0 || string(raw) == "null" {
		return "", false
	}
	what := "a synthetic checkpoint"
	var info model.SynthInfo
	if json.Unmarshal(raw, &info) == nil && info.Arch != "" {
		what = fmt.Sprintf("synthetic %s seed %d", info.Arch, info.Seed)
	}
	return fmt.Sprintf("generate: note: %s has random weights (a deterministic synthetic checkpoint), so the text is meaningless; the token ids, timings and cache counters are what generate measures", what), true
}

func expertScheme(s string) (qpack.Scheme, error) {
	switch s {
	case "int4":
		return qpack.SchemeInt4, nil
	case "fp16":
		return qpack.SchemeFP16, nil
	}
	return "", usageError("--experts %q: want int4 or fp16", s)
}

func parseIDs(s string) ([]int, error) {
	var ids []int
	for _, f := range strings.Split(s, ",") {
		var id int
		if _, err := fmt.Sscan(strings.TrimSpace(f), &id); err != nil {
			return nil, fmt.Errorf("%q is not a token id", f)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

func writeLogits(path string, rows [][]float32) error {
	var buf []byte
	for _, r := range rows {
		for _, v := range r {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
		}
	}
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		return fmt.Errorf("write logits: %w", err)
	}
	return nil
}

// obsText prints an observation: its value, or why there is none.
func obsText(o editions.Obs[int64]) string {
	if o.Ok() {
		return fmt.Sprint(o.Value)
	}
	return o.Status
}

// cfgMaxPositions is the artifact model's max_position_embeddings (0: not
// known).
func cfgMaxPositions(art *qpack.Artifact) int {
	cfg, err := art.Config()
	if err != nil {
		return 0
	}
	return cfg.MaxPositions
}

// decodeRate is a generation's decode rate, UNKNOWN when no token followed
// the first (engine.Result.DecodeTokS is 0 there: no interval, not a rate
// of 0).
func decodeRate(res engine.Result) editions.Obs[float64] {
	if len(res.Tokens) < 2 || !(res.DecodeSeconds > 0) {
		return editions.UnknownObs[float64]()
	}
	return editions.Observed(res.DecodeTokS())
}

// kvNames are the KV cache element types --kv takes (engine.KVDTypes),
// sorted.
func kvNames() []string { return slices.Sorted(maps.Keys(engine.KVDTypes)) }
