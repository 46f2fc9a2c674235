package worker

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/horizon-runmap/horizon/campaigns"
	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
	"github.com/horizon-runmap/horizon/fidelity"
	"github.com/horizon-runmap/horizon/runtime/engine"
	"github.com/horizon-runmap/horizon/runtime/model"
	"github.com/horizon-runmap/horizon/runtime/qpack"
	"github.com/horizon-runmap/horizon/runtime/tokenizer"
)

// FidelityOptions is one fidelity worker: one arm pair, one shard of the
// contract's prompts.
type FidelityOptions struct {
	Contract    *contracts.Fidelity
	ContractSHA string
	Campaign    *campaigns.Campaign
	// Reference and Treatment are the pair's arms (Treatment names it).
	Reference, Treatment *campaigns.Configuration
	Shard                int
	// ReferenceDir and TreatmentDir are the arms' prepared artifacts.
	ReferenceDir, TreatmentDir string
	Out                        string // where the shard record goes (written atomically)
	Device                     Device
	Started                    time.Time
	// Progress receives progress lines (campaigns.ProgressTokens); nil
	// discards.
	Progress io.Writer
}

// fidelityArm is one arm loaded: its artifact, model config and
// tokenizer.
type fidelityArm struct {
	cfg   *campaigns.Configuration
	dir   string
	art   *qpack.Artifact
	mcfg  model.Config
	tok   tokenizer.Tokenizer
	tmpl  *tokenizer.ChatTemplate
	rec   editions.FidelityArm
	start time.Time
}

// RunFidelity runs one shard of a pair. The arms run one after the other,
// each alone on the device: the reference generates every prompt of the
// shard greedily (until EOS or max_new_tokens) keeping its logits at each
// position; then the treatment generates every prompt freely, and again
// teacher-forced with the reference's tokens, and each forced position is
// compared with the reference's logits there (fidelity.Compare). The
// shard record is checked (fidelity.CheckShard) and written atomically.
func RunFidelity(o FidelityOptions) (err error) {
	k := o.Contract
	if o.Shard < 1 || o.Shard > k.Shards() {
		return fmt.Errorf("shard %d: contract %s has shards 1..%d", o.Shard, k.ID, k.Shards())
	}
	if o.Device.Name != o.Campaign.Device {
		return fmt.Errorf("worker device %s, campaign device %s", o.Device.Name, o.Campaign.Device)
	}
	progress := o.Progress
	if progress == nil {
		progress = io.Discard
	}
	started := o.Started
	if started.IsZero() {
		started = time.Now()
	}
	ins, err := fidelity.Inputs(k)
	if err != nil {
		return err
	}
	lo, hi := k.Generation().ShardRange(o.Shard)
	rec := editions.FidelityShard{
		Schema: editions.SchemaFidelityShard, Version: editions.Version,
		Edition: o.Campaign.Edition, PairID: o.Treatment.ID, Shard: o.Shard,
		Contract:    editions.ContractRef{ID: k.ID, SHA256: o.ContractSHA},
		StartedAt:   started.UTC().Format(time.RFC3339Nano),
		Environment: environment(o.Device),
		Forced:      []editions.FidelityForced{},
	}
	ref := &fidelityArm{cfg: o.Reference, dir: o.ReferenceDir}
	trt := &fidelityArm{cfg: o.Treatment, dir: o.TreatmentDir}
	for _, a := range []*fidelityArm{ref, trt} {
		if err := a.open(o.Campaign, k); err != nil {
			return fmt.Errorf("%s: %w", a.cfg.ID, err)
		}
	}
	if ref.rec.Setup.TokenizerSHA256 != trt.rec.Setup.TokenizerSHA256 || ref.rec.Setup.ChatTemplateSHA256 != trt.rec.Setup.ChatTemplateSHA256 {
		return fmt.Errorf("pair %s: the arms' tokenizers or chat templates differ", o.Treatment.ID)
	}
	// Rendering and tokenisation happen before admission, once: both arms
	// see the same ids.
	prompts := make([][]int, hi-lo)
	maxSeq := 0
	for i := lo; i < hi; i++ {
		text := ins[i].Prompt
		if ref.tmpl != nil {
			if text, err = ref.tmpl.Render([]tokenizer.Message{{Role: "user", Content: ins[i].Prompt}}, true); err != nil {
				return fmt.Errorf("key %d: chat template: %w", ins[i].Key, err)
			}
		}
		ids, err := ref.tok.Encode(text)
		if err != nil {
			return fmt.Errorf("key %d: %w", ins[i].Key, err)
		}
		if len(ids) == 0 {
			return fmt.Errorf("key %d encodes to no tokens", ins[i].Key)
		}
		prompts[i-lo] = ids
		maxSeq = max(maxSeq, len(ids)+k.MaxNewTokens)
	}
	fmt.Fprintf(progress, "%s 0\n", campaigns.ProgressTokens) // no warmup
	// The reference arm: free-running, logits kept at every position.
	refLogits := make([][][]float32, hi-lo)
	err = ref.run(o.Device, maxSeq, started, func(l *engine.Loaded) error {
		for i := lo; i < hi; i++ {
			res, err := l.Generate(engine.Request{Prompt: prompts[i-lo], Tokens: k.MaxNewTokens, LogitSteps: k.MaxNewTokens})
			if err != nil {
				return fmt.Errorf("key %d: %w", ins[i].Key, err)
			}
			ref.rec.Responses = append(ref.rec.Responses, ref.reply(ins[i].Key, ins[i].Prompt, prompts[i-lo], res))
			refLogits[i-lo] = res.Logits
			fmt.Fprintf(progress, "%s %d\n", campaigns.ProgressTokens, len(res.Tokens))
		}
		return nil
	})
	if err != nil {
		return err
	}
	// The treatment arm: free-running, then teacher-forced with the
	// reference's tokens.
	err = trt.run(o.Device, maxSeq, time.Now(), func(l *engine.Loaded) error {
		for i := lo; i < hi; i++ {
			res, err := l.Generate(engine.Request{Prompt: prompts[i-lo], Tokens: k.MaxNewTokens})
			if err != nil {
				return fmt.Errorf("key %d: %w", ins[i].Key, err)
			}
			trt.rec.Responses = append(trt.rec.Responses, trt.reply(ins[i].Key, ins[i].Prompt, prompts[i-lo], res))
			fmt.Fprintf(progress, "%s %d\n", campaigns.ProgressTokens, len(res.Tokens))
		}
		for i := lo; i < hi; i++ {
			forced := ref.rec.Responses[i-lo].TokenIDs
			res, err := l.Generate(engine.Request{Prompt: prompts[i-lo], Tokens: len(forced), Forced: forced, LogitSteps: len(forced)})
			if err != nil {
				return fmt.Errorf("key %d forced: %w", ins[i].Key, err)
			}
			positions, err := fidelity.CompareAll(forced, refLogits[i-lo], res.Logits, k.TopK)
			if err != nil {
				return fmt.Errorf("key %d: %w", ins[i].Key, err)
			}
			refLogits[i-lo] = nil // the reference's logits of this prompt are done with
			rec.Forced = append(rec.Forced, editions.FidelityForced{Key: ins[i].Key, Seconds: res.RuntimeSeconds, Positions: positions})
			fmt.Fprintf(progress, "%s %d\n", campaigns.ProgressTokens, len(forced))
		}
		return nil
	})
	if err != nil {
		return err
	}
	rec.Reference, rec.Treatment = ref.rec, trt.rec
	rec.FinishedAt = time.Now().UTC().Format(time.RFC3339Nano)
	if err := fidelity.CheckShard(k, o.ContractSHA, ins, o.Treatment.ID, o.Shard, &rec); err != nil {
		return fmt.Errorf("the worker's own record breaks the contract: %w", err)
	}
	return editions.WriteDoc(o.Out, &rec)
}

// open reads an arm's artifact, model config, tokenizer and chat template,
// and fills the parts of its record they determine.
func (a *fidelityArm) open(c *campaigns.Campaign, k *contracts.Fidelity) error {
	var err error
	if a.art, err = qpack.Open(a.dir); err != nil {
		return err
	}
	if a.mcfg, err = a.art.Config(); err != nil {
		return err
	}
	if a.tok, err = tokenizer.Load(a.dir); err != nil {
		return fmt.Errorf("artifact tokenizer: %w", err)
	}
	tokSHA, _, err := editions.HashFile(a.dir + "/" + tokenizer.FileName)
	if err != nil {
		return fmt.Errorf("hash the artifact tokenizer: %w", err)
	}
	format, tmplSHA := contracts.FormatRaw, ""
	if k.PromptFormat == contracts.FormatChatTemplate {
		if a.tmpl, err = tokenizer.LoadChatTemplate(a.dir); err != nil {
			return fmt.Errorf("chat template: %w", err)
		}
		if a.tmpl != nil {
			format, tmplSHA = contracts.FormatChatTemplate, a.tmpl.SHA256()
		}
	}
	a.rec = editions.FidelityArm{ConfigID: a.cfg.ID, ExpertFormat: a.cfg.ExpertFormat, Responses: []editions.IFEvalReply{}}
	if a.rec.Checkpoint, a.rec.Artifact, err = identity(c, a.cfg, a.art); err != nil {
		return err
	}
	a.rec.Setup = editions.IFEvalSetup{Model: modelOf(a.mcfg), PromptFormat: format, ChatTemplateSHA256: tmplSHA, TokenizerSHA256: tokSHA, MaxNewTokens: k.MaxNewTokens}
	return nil
}

// run loads the arm on the device, records its setup and preparation
// (from start), runs f and closes it.
func (a *fidelityArm) run(d Device, maxSeq int, start time.Time, f func(*engine.Loaded) error) (err error) {
	cfg := a.cfg
	l, err := engine.Load(d.Backend, d.Rows, a.art, engine.LoadOptions{
		Executor: cfg.Executor, Capacity: cfg.Capacity, Placement: cfg.Placement, Policy: cfg.Policy,
		Spares: cfg.Spares, Staging: cfg.Staging, Transport: cfg.Transport, Prefetch: cfg.Prefetch, Overlap: cfg.Overlap,
		StepMode: cfg.StepMode, Prefill: cfg.Prefill, KV: cfg.KV, ExpertActivations: cfg.ExpertActivations,
		DenseActivations: cfg.DenseActivations, MaxSeq: maxSeq,
	})
	if err != nil {
		return fmt.Errorf("load %s: %w", cfg.ID, err)
	}
	defer func() { err = errors.Join(err, l.Close()) }()
	opts := l.Cache.Options()
	prep := l.Cache.Preparation()
	a.rec.Preparation = editions.Preparation{
		Seconds:        time.Since(start).Seconds(),
		AuthorityBytes: int64(l.Authority.Layers()) * int64(l.Authority.Experts()) * int64(l.Authority.RecordSize()),
		H2DBytes:       prep.H2DBytes, H2DCopies: prep.H2DCopies,
	}
	a.rec.Artifact.ActivationDType = d.Backend.ActivationDType()
	a.rec.Artifact.KVDType = l.KVName()
	a.rec.Artifact.ExpertActivationDType = expertActivationDType(l.Engine)
	a.rec.Artifact.DenseActivationDType = denseActivationDType(l.Engine)
	s := &a.rec.Setup
	s.Capacity, s.Executor, s.Placement, s.Policy, s.StepMode, s.Prefill = opts.Capacity, l.ExecutorName(), opts.Placement, opts.Policy, l.StepMode(), l.PrefillMode()
	return f(l)
}

// reply is one free-running response as the record keeps it.
func (a *fidelityArm) reply(key int, prompt string, ids []int, res engine.Result) editions.IFEvalReply {
	ending := contracts.EndingLength
	if n := len(res.Tokens); n > 0 && slices.Contains(a.mcfg.EOSTokenIDs, res.Tokens[n-1]) {
		ending = contracts.EndingEOS
	}
	return editions.IFEvalReply{Key: key, PromptSHA256: fidelity.PromptSHA256(prompt), PromptTokenIDs: ids,
		TokenIDs: res.Tokens, Text: a.tok.Decode(res.Tokens), Ending: ending, Seconds: res.RuntimeSeconds}
}
