package campaigns

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
)

// ErrConformance marks a raw record that breaks its contract.
var ErrConformance = errors.New("record breaks the contract")

// CheckRecord checks one worker's raw record against the contract and the
// configuration it was run for: identity, the warmup, every measured
// request (prompt order, N, no EOS, timings consistent with the token
// timestamps) and every observation the contract requires of the device.
// It returns the first problem, wrapping ErrConformance.
func CheckRecord(k *contracts.Contract, c *Campaign, cfg *Configuration, block int, r *editions.RawRecord) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s block %d: %s", ErrConformance, cfg.ID, block, fmt.Sprintf(format, args...))
	}
	s := r.Setup
	switch {
	case r.Schema != editions.SchemaRaw || !editions.RawVersionKnown(r.Version):
		return bad("schema %q version %d", r.Schema, r.Version)
	case r.Edition != c.Edition || r.ConfigID != cfg.ID || r.Block != block:
		return bad("record is for edition %q, configuration %q, block %d", r.Edition, r.ConfigID, r.Block)
	case r.Contract.ID != k.ID || r.Contract.SHA256 != c.Contract.SHA256:
		return bad("measured under contract %s %s, want %s %s", r.Contract.ID, r.Contract.SHA256, k.ID, c.Contract.SHA256)
	case r.Environment.Device != c.Device:
		return bad("ran on %s, the campaign's device is %s", r.Environment.Device, c.Device)
	case s.Capacity != cfg.Capacity || s.Executor != cfg.Executor || s.Placement != cfg.Placement || s.Policy != cfg.Policy:
		return bad("ran capacity %d, %s, %s placement, %s policy; configured %d, %s, %s, %s",
			s.Capacity, s.Executor, s.Placement, s.Policy, cfg.Capacity, cfg.Executor, cfg.Placement, cfg.Policy)
	case r.Artifact.KVDTypeOf() != strings.ToUpper(cfg.KVOf()):
		return bad("ran a %s KV cache; configured kv %s", r.Artifact.KVDTypeOf(), cfg.KVOf())
	case r.Artifact.ExpertActivationDTypeOf() != strings.ToUpper(cfg.ExpertActivationsOf()):
		return bad("ran %s expert activations; configured expert_activations %s", r.Artifact.ExpertActivationDTypeOf(), cfg.ExpertActivationsOf())
	case r.Artifact.DenseActivationDTypeOf() != strings.ToUpper(cfg.DenseActivationsOf()):
		return bad("ran %s dense activations; configured dense_activations %s", r.Artifact.DenseActivationDTypeOf(), cfg.DenseActivationsOf())
	case s.Regime != Regime(s.Capacity, s.Model.ExpertsPerLayer):
		return bad("regime %q for capacity %d of %d", s.Regime, s.Capacity, s.Model.ExpertsPerLayer)
	case !r.Warmup.Excluded || r.Warmup.PromptID != k.Warmup.Prompt.ID || r.Warmup.N != k.Warmup.OutputTokens || len(r.Warmup.TokenIDs) != r.Warmup.N:
		return bad("warmup: excluded %v, prompt %q, %d tokens; the contract's warmup is excluded, prompt %q, %d tokens",
			r.Warmup.Excluded, r.Warmup.PromptID, r.Warmup.N, k.Warmup.Prompt.ID, k.Warmup.OutputTokens)
	}
	// The prompts a block runs: every required one, and each where-held
	// one the model's context holds (contracts.PromptsFor).
	run := k.PromptsFor(s.Model.MaxPositions)
	if len(r.Requests) != len(run) {
		return bad("%d measured requests, the contract has %d prompts per block for a %d-position context", len(r.Requests), len(run), s.Model.MaxPositions)
	}
	for i, q := range r.Requests {
		if err := checkRequest(k, run, s.Model.EOSTokenIDs, i, &q); err != nil {
			return bad("%v", err)
		}
	}
	doc, err := genericJSON(r)
	if err != nil {
		return bad("%v", err)
	}
	for _, o := range k.Observations {
		req := o.Requirement(c.Device)
		switch o.Scope {
		case contracts.ScopeWorker:
			if err := checkObservation(doc, o.Field, req); err != nil {
				return bad("observation %s (%s on %s): %v", o.Name, req, c.Device, err)
			}
		case contracts.ScopeRequest:
			reqs, _ := doc.(map[string]any)["requests"].([]any)
			for i, q := range reqs {
				if err := checkObservation(q, o.Field, req); err != nil {
					return bad("request %d: observation %s (%s on %s): %v", i, o.Name, req, c.Device, err)
				}
			}
		}
	}
	return nil
}

// Regime names a capacity: "full" when every expert of a layer is
// resident, else "partial".
func Regime(capacity, experts int) string {
	if capacity == experts {
		return "full"
	}
	return "partial"
}

func checkRequest(k *contracts.Contract, run []contracts.Prompt, eos []int, i int, q *editions.Request) error {
	n := k.OutputTokens
	switch {
	case q.Index != i || q.PromptID != run[i].ID:
		return fmt.Errorf("request %d is index %d, prompt %q; the block's prompt %d is %q", i, q.Index, q.PromptID, i, run[i].ID)
	case q.PromptTokens != len(q.PromptTokenIDs) || q.PromptTokens == 0:
		return fmt.Errorf("request %d: prompt_tokens %d, %d prompt token ids", i, q.PromptTokens, len(q.PromptTokenIDs))
	case k.PromptRule != nil && q.PromptTokens != run[i].Tokens:
		return fmt.Errorf("request %d: prompt %s has %d tokens, the contract declares %d (prompt_rule %s)", i, q.PromptID, q.PromptTokens, run[i].Tokens, k.PromptRule.ID)
	case q.N != n || len(q.TokenIDs) != n || len(q.TokenNs) != n:
		return fmt.Errorf("request %d: N %d, %d token ids, %d timestamps; the contract requires exactly %d tokens", i, q.N, len(q.TokenIDs), len(q.TokenNs), n)
	}
	for j, t := range q.TokenIDs {
		if slices.Contains(eos, t) {
			return fmt.Errorf("request %d: token %d is EOS (%d) though EOS is suppressed", i, j, t)
		}
	}
	for j := range q.TokenNs {
		if q.TokenNs[j] < 0 || (j > 0 && q.TokenNs[j] < q.TokenNs[j-1]) {
			return fmt.Errorf("request %d: token_ns[%d] = %d is negative or decreasing", i, j, q.TokenNs[j])
		}
	}
	first, last := q.TokenNs[0], q.TokenNs[n-1]
	if q.TTFTSeconds != float64(first)/1e9 || q.DecodeSeconds != float64(last-first)/1e9 || q.RuntimeSeconds != float64(last)/1e9 {
		return fmt.Errorf("request %d: ttft %v, decode %v, runtime %v s do not follow from token_ns (%d, %d ns)",
			i, q.TTFTSeconds, q.DecodeSeconds, q.RuntimeSeconds, first, last)
	}
	if p := q.PrefillSeconds; p != nil && p.Ok() && (p.Value <= 0 || p.Value > q.TTFTSeconds) {
		return fmt.Errorf("request %d: prefill %v s outside (0, ttft %v s]: prefill ends before the first token", i, p.Value, q.TTFTSeconds)
	}
	return nil
}

// checkObservation checks the value at pointer in doc against a
// requirement.
func checkObservation(doc any, pointer, requirement string) error {
	v, err := lookup(doc, pointer)
	if err != nil {
		return err
	}
	num, isNum := v.(json.Number)
	str, _ := v.(string)
	switch requirement {
	case contracts.Required:
		if !isNum {
			return fmt.Errorf("%s is %v, want a number", pointer, v)
		}
	case contracts.RequiredZero:
		if !isNum {
			return fmt.Errorf("%s is %v, want an observed 0", pointer, v)
		}
		if f, err := num.Float64(); err != nil || f != 0 {
			return fmt.Errorf("%s is %s, the contract requires 0", pointer, num)
		}
	case contracts.MayBeUnknown:
		if !isNum && str != editions.Unknown {
			return fmt.Errorf("%s is %v, want a number or %s", pointer, v, editions.Unknown)
		}
	case contracts.Unsupported:
		if str != editions.Unsupported {
			return fmt.Errorf("%s is %v, want %s", pointer, v, editions.Unsupported)
		}
	case contracts.Unknown:
		if str != editions.Unknown {
			return fmt.Errorf("%s is %v, want %s", pointer, v, editions.Unknown)
		}
	}
	return nil
}

// genericJSON round-trips v through JSON into maps, slices and
// json.Number.
func genericJSON(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out any
	return out, dec.Decode(&out)
}

// lookup resolves an RFC 6901 JSON pointer.
func lookup(doc any, pointer string) (any, error) {
	if pointer == "" {
		return doc, nil
	}
	if !strings.HasPrefix(pointer, "/") {
		return nil, fmt.Errorf("JSON pointer %q does not start with /", pointer)
	}
	cur := doc
	for _, tok := range strings.Split(pointer[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[tok]
			if !ok {
				return nil, fmt.Errorf("%s: no member %q", pointer, tok)
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, fmt.Errorf("%s: no element %q", pointer, tok)
			}
			cur = c[i]
		default:
			return nil, fmt.Errorf("%s: %q is inside a scalar", pointer, tok)
		}
	}
	return cur, nil
}
