package worker

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/horizon-runmap/horizon/campaigns"
	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
	"github.com/horizon-runmap/horizon/eviction"
	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/cache"
	"github.com/horizon-runmap/horizon/runtime/engine"
	"github.com/horizon-runmap/horizon/runtime/model"
	"github.com/horizon-runmap/horizon/runtime/observe"
	"github.com/horizon-runmap/horizon/runtime/qpack"
	"github.com/horizon-runmap/horizon/runtime/tokenizer"
)

// Device is the compute device a worker runs on.
type Device struct {
	Name    string          // "cpu" or "cuda"
	Backend backend.Backend // the compute backend
	Rows    cache.Device    // where expert rows live
	Threads int             // CPU goroutines per op (0 when not the CPU)
	GPU     string          // GPU name, "" on the CPU
	Driver  string          // GPU driver version, "" on the CPU
	// VRAM samples device memory through the whole worker (NVML): the
	// worker process starts it first thing, so preparation and warmup are
	// inside the peak, and Run stops it after the last request. nil:
	// the device cannot (UNSUPPORTED on the CPU, UNKNOWN elsewhere).
	VRAM observe.VRAMSampler
	// H2DBandwidth measures the pinned host-to-device bandwidth (nil: the
	// device cannot: UNSUPPORTED on the CPU, UNKNOWN elsewhere).
	H2DBandwidth func() (float64, error)
}

// Options is one worker: one configuration, one block.
type Options struct {
	Contract    *contracts.Contract
	ContractSHA string
	Campaign    *campaigns.Campaign
	Config      *campaigns.Configuration
	Block       int    // 1..contract blocks
	ArtifactDir string // the prepared artifact
	Out         string // where the raw record goes (written atomically)
	Device      Device
	// Started is when the worker process started: preparation is measured
	// from it.
	Started time.Time
	// Progress receives progress lines (campaigns.ProgressTokens, and under
	// a contract with declared prompt lengths campaigns.ProgressPrompt and
	// ProgressRequest); nil
	// discards.
	Progress io.Writer
}

// Run measures one block: it loads the artifact into a host
// authority and a cache with the configuration's capacity (engine.Load),
// runs the contract's warmup (excluded), then the block's prompts in
// contract order on the same evolving cache, each between
// cache.BeginRequest and cache.EndRequest, and writes the raw record
// atomically to o.Out. The record is checked against the contract before
// it is written.
func Run(o Options) (err error) {
	k, cfg := o.Contract, o.Config
	if o.Block < 1 || o.Block > k.Blocks {
		return fmt.Errorf("block %d: contract %s has blocks 1..%d", o.Block, k.ID, k.Blocks)
	}
	if o.Device.Name != o.Campaign.Device {
		return fmt.Errorf("worker device %s, campaign device %s", o.Device.Name, o.Campaign.Device)
	}
	if err := checkCapabilities(k, o.Device); err != nil {
		return err
	}
	progress := o.Progress
	if progress == nil {
		progress = io.Discard
	}
	started := o.Started
	if started.IsZero() {
		started = time.Now()
	}
	rec := editions.RawRecord{
		Schema: editions.SchemaRaw, Version: editions.RawVersion,
		Edition: o.Campaign.Edition, ConfigID: cfg.ID, Block: o.Block,
		Contract:  editions.ContractRef{ID: k.ID, SHA256: o.ContractSHA},
		StartedAt: started.UTC().Format(time.RFC3339Nano),
	}
	rec.Environment = environment(o.Device)

	art, err := qpack.Open(o.ArtifactDir)
	if err != nil {
		return err
	}
	mcfg, err := art.Config()
	if err != nil {
		return err
	}
	tok, err := tokenizer.Load(o.ArtifactDir)
	if err != nil {
		return fmt.Errorf("artifact tokenizer: %w", err)
	}
	tokSHA, _, err := editions.HashFile(filepath.Join(o.ArtifactDir, tokenizer.FileName))
	if err != nil {
		return fmt.Errorf("hash the artifact tokenizer: %w", err)
	}
	// Tokenisation happens before admission (contract timing). Under a
	// contract with declared prompt lengths each prompt is made to its
	// length by the contract's rule (contracts.PromptIDs).
	encode := func(p contracts.Prompt) ([]int, error) {
		ids, err := contracts.PromptIDs(k.PromptRule, p, tok.Encode)
		if err != nil {
			return nil, fmt.Errorf("prompt %s: %w", p.ID, err)
		}
		if len(ids) == 0 {
			return nil, fmt.Errorf("prompt %s encodes to no tokens", p.ID)
		}
		return ids, nil
	}
	warm, err := encode(k.Warmup.Prompt)
	if err != nil {
		return err
	}
	// The block runs the contract's prompts this model's context holds:
	// every required one (validation refused a configuration that cannot
	// hold one) and each where-held one that fits.
	run := k.PromptsFor(mcfg.MaxPositions)
	maxSeq := len(warm) + k.Warmup.OutputTokens
	prompts := make([][]int, len(run))
	for i, p := range run {
		if prompts[i], err = encode(p); err != nil {
			return err
		}
		maxSeq = max(maxSeq, len(prompts[i])+k.OutputTokens)
	}

	l, err := engine.Load(o.Device.Backend, o.Device.Rows, art, engine.LoadOptions{
		Executor: cfg.Executor, Capacity: cfg.Capacity, Placement: cfg.Placement, Policy: cfg.Policy,
		Spares: cfg.Spares, Staging: cfg.Staging, Transport: cfg.Transport, Prefetch: cfg.Prefetch, Overlap: cfg.Overlap,
		StepMode: cfg.StepMode, Prefill: cfg.Prefill, KV: cfg.KV, ExpertActivations: cfg.ExpertActivations, DenseActivations: cfg.DenseActivations,
		MaxSeq: maxSeq,
		Trace:  true,
	})
	if err != nil {
		return fmt.Errorf("load %s: %w", cfg.ID, err)
	}
	defer func() { err = errors.Join(err, l.Close()) }()
	if err := checkPrefillTiming(k, o.Device.Name, l.Engine); err != nil {
		return err
	}
	opts := l.Cache.Options()
	prep := l.Cache.Preparation()
	rec.Preparation = editions.Preparation{
		Seconds:        time.Since(started).Seconds(),
		AuthorityBytes: int64(l.Authority.Layers()) * int64(l.Authority.Experts()) * int64(l.Authority.RecordSize()),
		H2DBytes:       prep.H2DBytes,
		H2DCopies:      prep.H2DCopies,
	}
	if opts.Transport == cache.TransportRegistered {
		s := float64(prep.HostRegisterNs) / 1e9
		rec.Preparation.HostRegisterSeconds = &s
	}
	rec.Checkpoint, rec.Artifact, err = identity(o.Campaign, cfg, art)
	// The artifact records the activation type the format is designed for;
	// what was measured is what the backend computed in.
	rec.Artifact.ActivationDType = o.Device.Backend.ActivationDType()
	// The KV cache's element type is the engine's, as the campaign
	// declared it (campaigns.CheckRecord holds the two together).
	rec.Artifact.KVDType = l.KVName()
	// So is the routed experts' activation dtype (CheckRecord again).
	rec.Artifact.ExpertActivationDType = expertActivationDType(l.Engine)
	// And the dense projections' (CheckRecord again).
	rec.Artifact.DenseActivationDType = denseActivationDType(l.Engine)
	if err != nil {
		return err
	}
	rec.Setup = editions.Setup{
		Model: modelOf(mcfg), Capacity: opts.Capacity, Spares: opts.Spares, Staging: opts.Staging,
		Transport: opts.Transport, StepMode: l.StepMode(), Prefetch: l.PrefetchMode(), Overlap: l.OverlapMode(),
		Prefill: l.PrefillMode(), Executor: l.ExecutorName(), Placement: opts.Placement, Policy: opts.Policy,
		Regime: campaigns.Regime(opts.Capacity, mcfg.NumExperts), TokenizerSHA256: tokSHA,
	}
	prefetching := l.PrefetchMode() != engine.PrefetchOff
	// The routing trace starts at admission: the verifier replays it from
	// the initial placement, so nothing may have reached the cache yet.
	if tr := l.Cache.TakeTrace(); len(tr) != 0 {
		return fmt.Errorf("load %s: the cache was asked %d groups before the warmup; the routing trace would not replay from the initial placement", cfg.ID, len(tr))
	}

	// Warmup: excluded from every metric, but it runs on the same cache,
	// which evolves from here on.
	t := time.Now()
	wres, err := l.Generate(engine.Request{Prompt: warm, Tokens: k.Warmup.OutputTokens, SuppressEOS: true})
	if err != nil {
		return fmt.Errorf("warmup: %w", err)
	}
	rec.Warmup = editions.Warmup{
		Excluded: true, PromptID: k.Warmup.Prompt.ID, N: len(wres.Tokens), TokenIDs: wres.Tokens,
		Seconds: time.Since(t).Seconds(),
	}
	if rec.Warmup.RoutingTrace, err = routingTrace(l.Cache.TakeTrace()); err != nil {
		return fmt.Errorf("warmup: %w", err)
	}
	fmt.Fprintf(progress, "%s %d\n", campaigns.ProgressTokens, len(wres.Tokens))

	for i, p := range run {
		if k.PromptRule != nil {
			fmt.Fprintln(progress, campaigns.FormatPromptLine(p.ID, len(prompts[i])))
		}
		l.Cache.BeginRequest()
		res, err := l.Generate(engine.Request{Prompt: prompts[i], Tokens: k.OutputTokens, SuppressEOS: true})
		if err != nil {
			return fmt.Errorf("request %d (%s): %w", i, p.ID, err)
		}
		cc, err := l.Cache.EndRequest()
		if err != nil {
			return fmt.Errorf("request %d (%s): %w", i, p.ID, err)
		}
		trace, err := routingTrace(l.Cache.TakeTrace())
		if err != nil {
			return fmt.Errorf("request %d (%s): %w", i, p.ID, err)
		}
		rec.Requests = append(rec.Requests, editions.Request{
			Index: i, PromptID: p.ID, PromptTokens: len(prompts[i]), PromptTokenIDs: prompts[i],
			N: len(res.Tokens), TokenIDs: res.Tokens, TokenNs: res.TokenNs,
			TTFTSeconds: res.TTFTSeconds, DecodeSeconds: res.DecodeSeconds, RuntimeSeconds: res.RuntimeSeconds,
			PrefillSeconds: prefillObs(res), Cache: requestCache(cc, prefetching), RoutingTrace: trace,
		})
		if k.PromptRule != nil {
			fmt.Fprintln(progress, campaigns.FormatRequestLine(*prefillObs(res), res.DecodeSeconds))
		}
		fmt.Fprintf(progress, "%s %d\n", campaigns.ProgressTokens, len(res.Tokens))
	}

	rec.Observations = observeWorker(o.Device)
	rec.FinishedAt = time.Now().UTC().Format(time.RFC3339Nano)
	if err := campaigns.CheckRecord(k, o.Campaign, cfg, o.Block, &rec); err != nil {
		return fmt.Errorf("the worker's own record breaks the contract: %w", err)
	}
	return editions.WriteDoc(o.Out, &rec)
}

// prefillObs is a request's prefill time, UNKNOWN when the engine could not
// time it (an asynchronous backend).
func prefillObs(res engine.Result) *editions.Obs[float64] {
	o := editions.UnknownObs[float64]()
	if res.PrefillTimed {
		o = editions.Observed(res.PrefillSeconds)
	}
	return &o
}

// checkCapabilities fails before any work when the contract requires an
// observation this worker's device cannot make, rather than after a whole
// block whose record would break the contract.
func checkCapabilities(k *contracts.Contract, d Device) error {
	for _, o := range k.Observations {
		r := o.Requirement(d.Name)
		if r != contracts.Required && r != contracts.RequiredZero {
			continue
		}
		missing := ""
		// prefill_seconds depends on the step mode as well: checked
		// once the engine is loaded (checkPrefillTiming).
		switch o.Name {
		case "vram_peak_bytes", "vram_process_peak_bytes":
			if d.VRAM == nil {
				missing = "no VRAM sampler (NVML) was started"
			}
		case "h2d_bandwidth_bytes_per_s":
			if d.H2DBandwidth == nil {
				missing = "it has no H2D bandwidth probe"
			}
		}
		if missing != "" {
			return fmt.Errorf("contract %s requires %s on %s, but this worker cannot observe it: %s", k.ID, o.Name, d.Name, missing)
		}
	}
	return nil
}

// checkPrefillTiming fails before the warmup when the contract requires
// prefill_seconds and the loaded engine cannot time the end of prefill in
// its step mode (every request would record UNKNOWN): op by op on an
// asynchronous backend, or persistent steps.
func checkPrefillTiming(k *contracts.Contract, device string, e *engine.Engine) error {
	if k.RequiresPrefill(device) && !e.TimesPrefill() {
		return fmt.Errorf("contract %s requires prefill_seconds on %s, but this worker cannot observe it: the engine does not time the end of prefill in %s steps on this backend", k.ID, device, e.StepMode())
	}
	return nil
}

// routingTrace packs a request's routing trace for the raw record.
func routingTrace(events []eviction.Event) (*editions.RoutingTrace, error) {
	data, err := eviction.Encode(events)
	if err != nil {
		return nil, fmt.Errorf("encode the routing trace: %w", err)
	}
	return &editions.RoutingTrace{Format: eviction.TraceFormat, Events: len(events), Data: data}, nil
}

// requestCache turns cache counters into the record's: every counter exists
// in this cache, so each is an observed number (zeros included). The
// prefetch counters are recorded when prefetch is on.
func requestCache(c cache.Counters, prefetch bool) editions.RequestCache {
	rc := editions.RequestCache{
		Hits: c.Hits, Misses: c.Misses, Evictions: c.Evictions, H2DBytes: c.H2DBytes, H2DCopies: c.H2DCopies,
		D2HExpertBytes:       editions.Observed(c.D2HExpertBytes),
		Writebacks:           editions.Observed(c.Writebacks),
		AuthorityWrites:      editions.Observed(c.AuthorityWrites),
		RequestHashBytes:     editions.Observed(c.RequestHashBytes),
		RequestArtifactReads: editions.Observed(c.RequestArtifactReads),
		LayerMisses:          append([]int64{}, c.LayerMisses...),
	}
	if prefetch {
		rc.Prefetch = &editions.RequestPrefetch{
			Issued: c.PrefetchIssued, Loaded: c.PrefetchLoaded, Used: c.PrefetchUsed, H2DBytes: c.PrefetchH2DBytes,
			Groups: c.PrefetchGroups, Predicted: c.PrefetchPredicted, Routed: c.PrefetchRouted, Overlap: c.PrefetchOverlap,
		}
	}
	return rc
}

// observeWorker makes the whole-worker observations after the last request.
func observeWorker(d Device) editions.WorkerObservations {
	var obs editions.WorkerObservations
	absent := editions.UnknownObs[int64]()
	absentF := editions.UnknownObs[float64]()
	if d.Name == "cpu" {
		absent, absentF = editions.UnsupportedObs[int64](), editions.UnsupportedObs[float64]()
	}
	// RSS first: the H2D probe below allocates a pinned buffer that would
	// otherwise count in the worker's peak.
	obs.RSSPeakBytes = editions.UnknownObs[int64]()
	if hwm, err := observe.RSSPeakBytes(); err == nil {
		obs.RSSPeakBytes = editions.Observed(hwm)
	}
	obs.VRAMPeakBytes, obs.VRAMProcessPeakBytes = absent, absent
	if d.VRAM != nil {
		obs.VRAMPeakBytes, obs.VRAMProcessPeakBytes = editions.UnknownObs[int64](), editions.UnknownObs[int64]()
		if r, err := d.VRAM.Stop(); err == nil {
			obs.VRAMPeakBytes = editions.Observed(r.DevicePeak)
			if r.ProcessPeak >= 0 {
				obs.VRAMProcessPeakBytes = editions.Observed(r.ProcessPeak)
			}
			for _, s := range r.Samples {
				p := editions.UnknownObs[int64]()
				if s.ProcessUsed >= 0 {
					p = editions.Observed(s.ProcessUsed)
				}
				obs.VRAMTimeline = append(obs.VRAMTimeline, editions.VRAMSample{AtNs: s.AtNs, DeviceUsedBytes: s.DeviceUsed, ProcessUsedBytes: p})
			}
		}
	}
	obs.H2DBandwidthBytesPerS = absentF
	if d.H2DBandwidth != nil {
		if bw, err := d.H2DBandwidth(); err == nil {
			obs.H2DBandwidthBytesPerS = editions.Observed(bw)
		} else {
			obs.H2DBandwidthBytesPerS = editions.UnknownObs[float64]()
		}
	}
	return obs
}

// identity describes the checkpoint and artifact of a configuration.
func identity(c *campaigns.Campaign, cfg *campaigns.Configuration, art *qpack.Artifact) (editions.Checkpoint, editions.ArtifactRef, error) {
	m := art.Meta
	ck := editions.Checkpoint{SHA256: m.Identity.Source.CheckpointSHA256}
	switch {
	case cfg.Checkpoint.Synthetic != nil:
		info, err := synthInfo(art)
		if err != nil {
			return ck, editions.ArtifactRef{}, err
		}
		if info.Arch != cfg.Checkpoint.Synthetic.Arch || info.Seed != cfg.Checkpoint.Synthetic.Seed {
			return ck, editions.ArtifactRef{}, fmt.Errorf("artifact %s was prepared from synthetic %s seed %d, configuration %s wants %s",
				art.Dir, info.Arch, info.Seed, cfg.ID, cfg.Checkpoint)
		}
		seed := int64(info.Seed)
		ck.Kind, ck.Arch, ck.Seed = "synthetic", info.Arch, &seed
	default:
		ck.Kind, ck.Arch, ck.Dir, ck.Revision = "hf", m.Identity.Arch, cfg.Checkpoint.HF.Dir, cfg.Checkpoint.HF.Revision
	}
	scale := "none"
	if m.DTypes.ScaleDType != nil {
		scale = *m.DTypes.ScaleDType
	}
	ar := editions.ArtifactRef{
		SHA256: m.ArtifactSHA256, ExpertFormat: string(m.DTypes.RoutedScheme), RecordBytes: int64(m.Experts.RecordBytes),
		OriginalDType: m.DTypes.OriginalDType, ScaleDType: scale, NonRoutedDType: m.DTypes.NonRoutedDType,
		ActivationDType: m.DTypes.ActivationDType, AccumulationDType: m.DTypes.AccumulationDType,
	}
	return ck, ar, nil
}

func modelOf(c model.Config) editions.Model {
	return editions.Model{
		ModelType: c.ModelType, Layers: c.NumLayers, Hidden: c.HiddenSize, ExpertsPerLayer: c.NumExperts,
		TopK: c.TopK, ExpertFFN: c.ExpertFFN, SharedFFN: c.SharedFFN, Vocab: c.VocabSize,
		EOSTokenIDs: append([]int{}, c.EOSTokenIDs...), MaxPositions: c.MaxPositions,
	}
}

// processStarted is read while the Go runtime initialises packages, a few
// milliseconds after the process started.
var processStarted = time.Now()

// Started is when this process started (see processStarted): a worker's
// preparation seconds are measured from it.
func Started() time.Time { return processStarted }

// expertActivationDType is the engine's expert activation dtype as a raw
// record's artifact.expert_activation_dtype states it: FP16 where the
// routed experts' batched-prefill matmuls took FP16 activations, and ""
// (omitted, which reads as FP32) where they took FP32, so that an FP32
// run's records read exactly as records made before the field.
func expertActivationDType(e *engine.Engine) string {
	if n := e.ExpertActivationName(); n != editions.ExpertActFP32 {
		return n
	}
	return ""
}

// denseActivationDType is the engine's dense activation dtype as a raw
// record's artifact.dense_activation_dtype states it: FP16 where a batched
// prefill's dense projections took FP16 activations, and "" (omitted,
// which reads as FP32) where they took FP32, so that an FP32 run's records
// read exactly as records made before the field.
func denseActivationDType(e *engine.Engine) string {
	if n := e.DenseActivationName(); n != editions.ExpertActFP32 {
		return n
	}
	return ""
}
