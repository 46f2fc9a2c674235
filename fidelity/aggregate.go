package fidelity

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
	"github.com/horizon-runmap/horizon/ifeval"
)

// Inputs returns the contract's population: the embedded official IFEval
// input, checked against the contract's hash, cut to its first prompts and
// checked against its declared counts.
func Inputs(k *contracts.Fidelity) ([]ifeval.Input, error) {
	if ifeval.OfficialInputSHA256 != k.Input.SHA256 {
		return nil, fmt.Errorf("contract %s pins input sha256 %s; this build embeds %s", k.ID, k.Input.SHA256, ifeval.OfficialInputSHA256)
	}
	all, err := ifeval.OfficialInputs()
	if err != nil {
		return nil, err
	}
	if k.Input.First > len(all) {
		return nil, fmt.Errorf("contract %s: input.first %d, the input has %d prompts", k.ID, k.Input.First, len(all))
	}
	ins := all
	if k.Input.First > 0 {
		ins = all[:k.Input.First]
	}
	n := 0
	for _, in := range ins {
		n += len(in.InstructionIDList)
	}
	if len(ins) != k.Input.Prompts || n != k.Input.Instructions {
		return nil, fmt.Errorf("contract %s declares %d prompts and %d instructions; the input gives %d and %d", k.ID, k.Input.Prompts, k.Input.Instructions, len(ins), n)
	}
	return ins, nil
}

// PromptSHA256 is the hex SHA-256 of a prompt's text.
func PromptSHA256(prompt string) string {
	s := sha256.Sum256([]byte(prompt))
	return hex.EncodeToString(s[:])
}

// CheckShard checks one shard record: its place (pair, shard), the
// contract it names (contractSHA "" skips the hash), both arms (their
// expert formats are the contract's arms, their setups equal but for the
// weights, each holds the shard's prompts in file order with the same
// prompt ids and valid endings) and the forced positions (one per
// reference token, fed that token, each consistent with its top entries).
func CheckShard(k *contracts.Fidelity, contractSHA string, ins []ifeval.Input, pairID string, shard int, s *editions.FidelityShard) error {
	lo, hi := k.Generation().ShardRange(shard)
	where := fmt.Sprintf("pair %s shard %d", pairID, shard)
	switch {
	case s.Schema != editions.SchemaFidelityShard || s.Version != editions.Version:
		return fmt.Errorf("%s: schema %s version %d, want %s %d", where, s.Schema, s.Version, editions.SchemaFidelityShard, editions.Version)
	case s.Shard != shard || s.PairID != pairID:
		return fmt.Errorf("%s: the record is pair %s shard %d", where, s.PairID, s.Shard)
	case s.Contract.ID != k.ID || (contractSHA != "" && s.Contract.SHA256 != contractSHA):
		return fmt.Errorf("%s: measured under contract %s %.12s, the edition's is %s %.12s", where, s.Contract.ID, s.Contract.SHA256, k.ID, contractSHA)
	case s.Treatment.ConfigID != pairID:
		return fmt.Errorf("%s: the treatment arm is configuration %s; a pair is named by its treatment", where, s.Treatment.ConfigID)
	case s.Reference.ExpertFormat != k.Arms.Reference || s.Treatment.ExpertFormat != k.Arms.Treatment:
		return fmt.Errorf("%s: arms %s (reference) and %s (treatment), the contract's are %s and %s", where, s.Reference.ExpertFormat, s.Treatment.ExpertFormat, k.Arms.Reference, k.Arms.Treatment)
	case s.Reference.Checkpoint != s.Treatment.Checkpoint && !sameCheckpoint(s.Reference.Checkpoint, s.Treatment.Checkpoint):
		return fmt.Errorf("%s: the arms ran different checkpoints (%s, %s)", where, s.Reference.Checkpoint.SHA256, s.Treatment.Checkpoint.SHA256)
	case s.Reference.Artifact.SHA256 == s.Treatment.Artifact.SHA256:
		return fmt.Errorf("%s: both arms ran artifact %.12s", where, s.Reference.Artifact.SHA256)
	case s.Reference.Artifact.KVDTypeOf() != s.Treatment.Artifact.KVDTypeOf():
		return fmt.Errorf("%s: the arms ran different KV caches (%s reference, %s treatment); they differ in their experts only", where, s.Reference.Artifact.KVDTypeOf(), s.Treatment.Artifact.KVDTypeOf())
	case !sameSetup(s.Reference.Setup, s.Treatment.Setup):
		return fmt.Errorf("%s: the arms' setups differ beyond their expert format (%+v, %+v)", where, s.Reference.Setup, s.Treatment.Setup)
	case len(s.Forced) != hi-lo:
		return fmt.Errorf("%s: %d forced prompts, the shard holds prompts %d..%d", where, len(s.Forced), lo, hi-1)
	}
	for _, a := range []struct {
		name string
		arm  *editions.FidelityArm
	}{{"reference", &s.Reference}, {"treatment", &s.Treatment}} {
		if err := checkArm(k, ins[lo:hi], a.arm); err != nil {
			return fmt.Errorf("%s %s arm (%s): %w", where, a.name, a.arm.ConfigID, err)
		}
	}
	for j, f := range s.Forced {
		ref, trt := s.Reference.Responses[j], s.Treatment.Responses[j]
		if !slices.Equal(ref.PromptTokenIDs, trt.PromptTokenIDs) {
			return fmt.Errorf("%s key %d: the arms saw different prompt ids", where, ref.Key)
		}
		if f.Key != ref.Key {
			return fmt.Errorf("%s forced %d: key %d, want %d", where, j, f.Key, ref.Key)
		}
		if len(f.Positions) != len(ref.TokenIDs) {
			return fmt.Errorf("%s key %d: %d forced positions, the reference response has %d tokens", where, f.Key, len(f.Positions), len(ref.TokenIDs))
		}
		if !(f.Seconds > 0) {
			return fmt.Errorf("%s key %d: forced request of %v seconds", where, f.Key, f.Seconds)
		}
		for i, p := range f.Positions {
			if p.Index != i || p.Token != ref.TokenIDs[i] {
				return fmt.Errorf("%s key %d: position %d is index %d fed %d, want index %d fed the reference's %d", where, f.Key, i, p.Index, p.Token, i, ref.TokenIDs[i])
			}
			if p.RefArgmax != ref.TokenIDs[i] {
				// The reference's free run is greedy with nothing masked:
				// its token at i is its argmax there.
				return fmt.Errorf("%s key %d position %d: the reference's argmax %d is not its greedy token %d", where, f.Key, i, p.RefArgmax, ref.TokenIDs[i])
			}
			if err := CheckPosition(p, k.TopK); err != nil {
				return fmt.Errorf("%s key %d: %w", where, f.Key, err)
			}
		}
	}
	return nil
}

func isEOS(id int, eos []int) bool { return slices.Contains(eos, id) }

func sameCheckpoint(a, b editions.Checkpoint) bool {
	return a.Kind == b.Kind && a.Arch == b.Arch && a.SHA256 == b.SHA256 && a.Dir == b.Dir && a.Revision == b.Revision &&
		(a.Seed == nil) == (b.Seed == nil) && (a.Seed == nil || *a.Seed == *b.Seed)
}

// sameSetup: everything but the weights is equal between the arms.
func sameSetup(a, b editions.IFEvalSetup) bool {
	return a.Capacity == b.Capacity && a.Executor == b.Executor && a.Placement == b.Placement && a.Policy == b.Policy &&
		a.StepMode == b.StepMode && a.Prefill == b.Prefill && a.PromptFormat == b.PromptFormat &&
		a.ChatTemplateSHA256 == b.ChatTemplateSHA256 && a.TokenizerSHA256 == b.TokenizerSHA256 &&
		a.MaxNewTokens == b.MaxNewTokens && slices.Equal(a.Model.EOSTokenIDs, b.Model.EOSTokenIDs)
}

// checkArm checks an arm's responses to the shard's inputs.
func checkArm(k *contracts.Fidelity, ins []ifeval.Input, a *editions.FidelityArm) error {
	switch {
	case a.Setup.MaxNewTokens != k.MaxNewTokens:
		return fmt.Errorf("max_new_tokens %d, the contract's is %d", a.Setup.MaxNewTokens, k.MaxNewTokens)
	case a.Setup.PromptFormat != contracts.FormatRaw && a.Setup.PromptFormat != contracts.FormatChatTemplate:
		return fmt.Errorf("prompt format %q", a.Setup.PromptFormat)
	case k.PromptFormat == contracts.FormatRaw && a.Setup.PromptFormat != contracts.FormatRaw:
		return fmt.Errorf("prompt format %s, the contract prescribes raw", a.Setup.PromptFormat)
	case len(a.Setup.Model.EOSTokenIDs) == 0:
		return fmt.Errorf("the record lists no EOS ids")
	case len(a.Responses) != len(ins):
		return fmt.Errorf("%d responses for %d prompts", len(a.Responses), len(ins))
	}
	for j, r := range a.Responses {
		if r.Key != ins[j].Key || r.PromptSHA256 != PromptSHA256(ins[j].Prompt) {
			return fmt.Errorf("response %d: key %d (prompt sha256 %.12s), want key %d", j, r.Key, r.PromptSHA256, ins[j].Key)
		}
		if len(r.PromptTokenIDs) == 0 {
			return fmt.Errorf("key %d: no prompt tokens", r.Key)
		}
		if err := checkEnding(r, a.Setup.Model.EOSTokenIDs, k.MaxNewTokens); err != nil {
			return fmt.Errorf("key %d: %w", r.Key, err)
		}
		if !(r.Seconds > 0) {
			return fmt.Errorf("key %d: %v seconds", r.Key, r.Seconds)
		}
	}
	return nil
}

// checkEnding: eos means the last id is an EOS id and none before it;
// length means max ids and no EOS id among them.
func checkEnding(r editions.IFEvalReply, eos []int, max int) error {
	n := len(r.TokenIDs)
	if n == 0 || n > max {
		return fmt.Errorf("%d tokens, want 1..%d", n, max)
	}
	for i, t := range r.TokenIDs[:n-1] {
		if isEOS(t, eos) {
			return fmt.Errorf("EOS id %d at token %d of %d: generation ends at EOS", t, i, n)
		}
	}
	last := isEOS(r.TokenIDs[n-1], eos)
	switch r.Ending {
	case contracts.EndingEOS:
		if !last {
			return fmt.Errorf("ending eos, but the last token %d is not an EOS id %v", r.TokenIDs[n-1], eos)
		}
	case contracts.EndingLength:
		if last || n != max {
			return fmt.Errorf("ending length with %d tokens (last an EOS id: %v); want %d tokens and no EOS", n, last, max)
		}
	default:
		return fmt.Errorf("ending %q: want %s or %s", r.Ending, contracts.EndingEOS, contracts.EndingLength)
	}
	return nil
}

// Aggregate checks a pair's shards (CheckShard, in shard order), scores
// both arms' responses with the frozen IFEval checkers, pairs the verdicts
// and summarises the divergence: the pair's document.
func Aggregate(k *contracts.Fidelity, ins []ifeval.Input, pairID string, shards []*editions.FidelityShard) (editions.FidelityPair, error) {
	d := editions.FidelityPair{Schema: editions.SchemaFidelityPair, Version: editions.Version, ID: pairID, Rules: ifeval.Rules.Version,
		Bootstrap: editions.FidelityBootstrap(k.Bootstrap), Prompts: []editions.FidelityPromptRow{}}
	if k.Scorer != ifeval.Rules.Version {
		return d, fmt.Errorf("contract %s scores with %s; this build's scorer is %s", k.ID, k.Scorer, ifeval.Rules.Version)
	}
	if len(shards) != k.Shards() {
		return d, fmt.Errorf("pair %s: %d shards, the contract has %d", pairID, len(shards), k.Shards())
	}
	var refs, trts []editions.IFEvalReply
	var forced []editions.FidelityForced
	for i, s := range shards {
		if err := CheckShard(k, "", ins, pairID, i+1, s); err != nil {
			return d, err
		}
		if i > 0 && (s.Reference.ConfigID != shards[0].Reference.ConfigID || !sameCheckpoint(s.Reference.Checkpoint, shards[0].Reference.Checkpoint)) {
			return d, fmt.Errorf("pair %s shard %d: reference %s, shard 1's is %s", pairID, i+1, s.Reference.ConfigID, shards[0].Reference.ConfigID)
		}
		d.Shards = append(d.Shards, editions.FidelityShardPath(pairID, i+1))
		wall, err := ShardWall(s)
		if err != nil {
			return d, fmt.Errorf("pair %s shard %d: %w", pairID, i+1, err)
		}
		d.WallSeconds += wall.Seconds()
		refs = append(refs, s.Reference.Responses...)
		trts = append(trts, s.Treatment.Responses...)
		forced = append(forced, s.Forced...)
	}
	d.Reference, d.Treatment, d.Checkpoint = shards[0].Reference.ConfigID, pairID, shards[0].Treatment.Checkpoint
	b := Bootstrap(k.Bootstrap)
	var kl, diff [][]float64
	var top1 [][]bool
	var firsts []float64
	for i, in := range ins {
		rv, err := ifeval.Evaluate(in, refs[i].Text)
		if err != nil {
			return d, err
		}
		tv, err := ifeval.Evaluate(in, trts[i].Text)
		if err != nil {
			return d, err
		}
		row := editions.FidelityPromptRow{Key: in.Key, InstructionIDList: in.InstructionIDList,
			RefStrict: rv.Strict, TrtStrict: tv.Strict, RefLoose: rv.Loose, TrtLoose: tv.Loose,
			Strict: string(Classify(all(rv.Strict), all(tv.Strict))), Loose: string(Classify(all(rv.Loose), all(tv.Loose))),
			Identical: refs[i].Text == trts[i].Text, Positions: len(forced[i].Positions)}
		for _, m := range []struct {
			mode     *editions.FidelityMode
			ref, trt []bool
			outcome  string
		}{{&d.Strict, rv.Strict, tv.Strict, row.Strict}, {&d.Loose, rv.Loose, tv.Loose, row.Loose}} {
			Count(&m.mode.Prompts, Outcome(m.outcome))
			if row.Identical {
				m.mode.Prompts.Identical++
			}
			for j := range m.ref {
				Count(&m.mode.Instructions, Classify(m.ref[j], m.trt[j]))
			}
		}
		if at, ok := FirstDivergence(refs[i].TokenIDs, trts[i].TokenIDs); ok {
			row.FirstDivergence = &at
			firsts = append(firsts, float64(at))
		}
		var pk, pd []float64
		var pt []bool
		for _, p := range forced[i].Positions {
			pk, pd, pt = append(pk, p.KL), append(pd, p.MaxAbsLogitDiff), append(pt, p.Top1)
		}
		name := fmt.Sprintf("%s/%d/", pairID, in.Key)
		var ok1, ok2, ok3 bool
		row.KL, ok1 = b.Summarize(name+"kl", [][]float64{pk})
		row.MaxAbsLogitDiff, ok2 = b.Summarize(name+"max_abs_logit_diff", [][]float64{pd})
		row.Top1, ok3 = b.RateOf(name+"top1", [][]bool{pt})
		if !ok1 || !ok2 || !ok3 {
			return d, fmt.Errorf("pair %s key %d: no forced position", pairID, in.Key)
		}
		kl, diff, top1 = append(kl, pk), append(diff, pd), append(top1, pt)
		d.Positions += len(pk)
		d.Prompts = append(d.Prompts, row)
	}
	for _, m := range []*editions.FidelityMode{&d.Strict, &d.Loose} {
		if p, ok := McNemar(m.Prompts.Regression, m.Prompts.Improvement); ok {
			m.McNemarP = &p
		}
	}
	d.KL, _ = b.Summarize(pairID+"/kl", kl)
	d.MaxAbsLogitDiff, _ = b.Summarize(pairID+"/max_abs_logit_diff", diff)
	d.Top1, _ = b.RateOf(pairID+"/top1", top1)
	d.Diverged = len(firsts)
	if len(firsts) > 0 {
		s, _ := b.Summarize(pairID+"/first_divergence", [][]float64{firsts})
		d.FirstDivergence = &s
	}
	return d, nil
}

func all(v []bool) bool {
	for _, x := range v {
		if !x {
			return false
		}
	}
	return true
}

// ClaimsOf lists the claims of a fidelity edition: per pair, the
// contract's metrics (contracts.FidelityMetrics), strict mode for the
// paired counts.
func ClaimsOf(edition, evidence, publication string, pairs []editions.FidelityPair) editions.FidelityClaims {
	out := editions.FidelityClaims{Schema: editions.SchemaFidelityClaims, Version: editions.Version, Edition: edition, Claims: []editions.FidelityClaim{}}
	for _, d := range pairs {
		add := func(metric string, v *float64, ci *editions.FidelityInterval) {
			out.Claims = append(out.Claims, editions.FidelityClaim{ID: d.ID + "." + metric, Pair: d.ID, Metric: metric, Value: v, CI: ci,
				Evidence: evidence, Publication: publication, Synthetic: d.Checkpoint.Kind == "synthetic"})
		}
		num := func(x float64) *float64 { return &x }
		ci := func(s editions.FidelityStat) *editions.FidelityInterval { c := s.CI; return &c }
		add("paired_regressions", num(float64(d.Strict.Prompts.Regression)), nil)
		add("paired_improvements", num(float64(d.Strict.Prompts.Improvement)), nil)
		add("mcnemar_p", d.Strict.McNemarP, nil)
		add("kl_median", num(d.KL.Median.Value), ci(d.KL.Median))
		add("kl_p90", num(d.KL.P90.Value), ci(d.KL.P90))
		add("kl_max", num(d.KL.Max.Value), ci(d.KL.Max))
		add("top1_agreement", num(d.Top1.Value.Value), ci(d.Top1.Value))
		add("max_abs_logit_diff_max", num(d.MaxAbsLogitDiff.Max.Value), ci(d.MaxAbsLogitDiff.Max))
	}
	return out
}

// ShardWall is a shard's wall clock, finished_at - started_at; an
// unparsable time or a shard that finished before it started is an error.
func ShardWall(s *editions.FidelityShard) (time.Duration, error) {
	start, err := time.Parse(time.RFC3339Nano, s.StartedAt)
	if err != nil {
		return 0, fmt.Errorf("started_at: %w", err)
	}
	end, err := time.Parse(time.RFC3339Nano, s.FinishedAt)
	if err != nil {
		return 0, fmt.Errorf("finished_at: %w", err)
	}
	if end.Before(start) {
		return 0, fmt.Errorf("finished_at %s is before started_at %s", s.FinishedAt, s.StartedAt)
	}
	return end.Sub(start), nil
}
