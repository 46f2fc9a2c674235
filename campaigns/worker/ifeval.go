package worker

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/horizon-runmap/horizon/campaigns"
	"github.com/horizon-runmap/horizon/campaigns/report"
	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
	"github.com/horizon-runmap/horizon/runtime/engine"
	"github.com/horizon-runmap/horizon/runtime/qpack"
	"github.com/horizon-runmap/horizon/runtime/tokenizer"
)

// IFEvalOptions is one IFEval worker: one configuration, one shard of the
// contract's prompts.
type IFEvalOptions struct {
	Contract    *contracts.IFEval
	ContractSHA string
	Campaign    *campaigns.Campaign
	Config      *campaigns.Configuration
	Shard       int    // 1..contract shards
	ArtifactDir string // the prepared artifact
	Out         string // where the shard record goes (written atomically)
	Device      Device
	Started     time.Time
	// Progress receives progress lines (campaigns.ProgressTokens); nil
	// discards. The first line is "tokens 0": an IFEval worker has no
	// warmup request.
	Progress io.Writer
}

// RunIFEval generates the responses of one shard: it loads the artifact
// with the configuration's capacity, renders each prompt (the checkpoint's
// chat template with one user message and the generation prompt, or the
// raw prompt), generates greedily until an EOS id or max_new_tokens, and
// writes the shard record atomically, checked first.
func RunIFEval(o IFEvalOptions) (err error) {
	k, cfg := o.Contract, o.Config
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
	ins, err := report.IFEvalInputs(k)
	if err != nil {
		return err
	}
	lo, hi := k.ShardRange(o.Shard)
	rec := editions.IFEvalShard{
		Schema: editions.SchemaIFEvalShard, Version: editions.Version,
		Edition: o.Campaign.Edition, ConfigID: cfg.ID, Shard: o.Shard,
		Contract:    editions.ContractRef{ID: k.ID, SHA256: o.ContractSHA},
		StartedAt:   started.UTC().Format(time.RFC3339Nano),
		Environment: environment(o.Device),
		Responses:   []editions.IFEvalReply{},
	}
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
	tokSHA, _, err := editions.HashFile(o.ArtifactDir + "/" + tokenizer.FileName)
	if err != nil {
		return fmt.Errorf("hash the artifact tokenizer: %w", err)
	}
	format, tmplSHA := contracts.FormatRaw, ""
	var tmpl *tokenizer.ChatTemplate
	if k.PromptFormat == contracts.FormatChatTemplate {
		if tmpl, err = tokenizer.LoadChatTemplate(o.ArtifactDir); err != nil {
			return fmt.Errorf("chat template: %w", err)
		}
		if tmpl != nil {
			format, tmplSHA = contracts.FormatChatTemplate, tmpl.SHA256()
		}
	}
	// Rendering and tokenisation happen before admission.
	prompts := make([][]int, hi-lo)
	maxSeq := 0
	for i := lo; i < hi; i++ {
		text := ins[i].Prompt
		if tmpl != nil {
			if text, err = tmpl.Render([]tokenizer.Message{{Role: "user", Content: ins[i].Prompt}}, true); err != nil {
				return fmt.Errorf("key %d: chat template: %w", ins[i].Key, err)
			}
		}
		ids, err := tok.Encode(text)
		if err != nil {
			return fmt.Errorf("key %d: %w", ins[i].Key, err)
		}
		if len(ids) == 0 {
			return fmt.Errorf("key %d encodes to no tokens", ins[i].Key)
		}
		prompts[i-lo] = ids
		maxSeq = max(maxSeq, len(ids)+k.MaxNewTokens)
	}
	l, err := engine.Load(o.Device.Backend, o.Device.Rows, art, engine.LoadOptions{
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
	rec.Preparation = editions.Preparation{
		Seconds:        time.Since(started).Seconds(),
		AuthorityBytes: int64(l.Authority.Layers()) * int64(l.Authority.Experts()) * int64(l.Authority.RecordSize()),
		H2DBytes:       prep.H2DBytes, H2DCopies: prep.H2DCopies,
	}
	if rec.Checkpoint, rec.Artifact, err = identity(o.Campaign, cfg, art); err != nil {
		return err
	}
	rec.Artifact.ActivationDType = o.Device.Backend.ActivationDType()
	rec.Artifact.KVDType = l.KVName()
	rec.Artifact.ExpertActivationDType = expertActivationDType(l.Engine)
	rec.Artifact.DenseActivationDType = denseActivationDType(l.Engine)
	rec.Setup = editions.IFEvalSetup{
		Model: modelOf(mcfg), Capacity: opts.Capacity, Executor: l.ExecutorName(), Placement: opts.Placement,
		Policy: opts.Policy, StepMode: l.StepMode(), Prefill: l.PrefillMode(), PromptFormat: format, ChatTemplateSHA256: tmplSHA,
		TokenizerSHA256: tokSHA, MaxNewTokens: k.MaxNewTokens,
	}
	fmt.Fprintf(progress, "%s 0\n", campaigns.ProgressTokens) // no warmup
	for i := lo; i < hi; i++ {
		res, err := l.Generate(engine.Request{Prompt: prompts[i-lo], Tokens: k.MaxNewTokens})
		if err != nil {
			return fmt.Errorf("key %d: %w", ins[i].Key, err)
		}
		ending := contracts.EndingLength
		if n := len(res.Tokens); n > 0 && slices.Contains(mcfg.EOSTokenIDs, res.Tokens[n-1]) {
			ending = contracts.EndingEOS
		}
		rec.Responses = append(rec.Responses, editions.IFEvalReply{
			Key: ins[i].Key, PromptSHA256: report.PromptSHA256(ins[i].Prompt), PromptTokenIDs: prompts[i-lo],
			TokenIDs: res.Tokens, Text: tok.Decode(res.Tokens), Ending: ending, Seconds: res.RuntimeSeconds,
		})
		fmt.Fprintf(progress, "%s %d\n", campaigns.ProgressTokens, len(res.Tokens))
	}
	rec.FinishedAt = time.Now().UTC().Format(time.RFC3339Nano)
	if err := report.CheckIFEvalShard(k, o.ContractSHA, ins, cfg.ID, o.Shard, &rec); err != nil {
		return fmt.Errorf("the worker's own record breaks the contract: %w", err)
	}
	return editions.WriteDoc(o.Out, &rec)
}
