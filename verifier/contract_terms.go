package verifier

import (
	"encoding/json"
	"slices"
	"strconv"
)

// What the verifier reads from contract.json and campaign.json
// (editions.ContractDoc and editions.CampaignDoc, whose bodies follow
// contracts.Contract and campaigns.Campaign). They are read generically,
// through these JSON pointers, so that the verifier depends on the
// documented format only, never on the runner's code:
//
//	contract.json
//	  /id, /sha256                       the contract's id and canonical hash
//	  /contract                          the contract; sha256 = CanonicalHash of it
//	  /contract/id                       must equal /id
//	  /contract/blocks                   blocks (worker processes) per configuration
//	  /contract/output_tokens            N of every measured request
//	  /contract/selection, /contract/eos "greedy", "suppressed" (what this verifier checks)
//	  /contract/prompts/<i>/id           prompt ids in contract order
//	  /contract/prompts/<i>/tokens       a prompt's declared length in tokens (with a prompt_rule)
//	  /contract/prompt_rule/{id,separator}  how declared lengths are made from the text
//	                                     (repeat-truncate-v1, the only rule this verifier knows)
//	  /contract/warmup/prompt/id         the warmup's prompt id
//	  /contract/warmup/output_tokens     the warmup's token count
//	  /contract/warmup/excluded          true
//	  /contract/cache/policy             the eviction policy every configuration runs,
//	  /contract/cache/policies           unless the contract admits these others
//	  /contract/observations/<i>         {name, scope, field, cpu, cuda}: what each
//	                                     device must observe, at a JSON pointer
//	                                     into the raw record (scope "worker") or
//	                                     into each measured request ("request")
//
//	campaign.json
//	  /edition, /sha256, /campaign       sha256 = CanonicalHash of /campaign
//	  /campaign/contract/{id,sha256}     the contract the campaign runs
//	  /campaign/device                   the device every worker ran on
//	  /campaign/configurations/<i>       {id, capacity, executor, seed_executor,
//	                                     placement, policy}
//
// When the contract format moves, this file moves with it.

// Observation requirements (contracts' vocabulary).
const (
	reqRequired     = "required"
	reqRequiredZero = "required_zero"
	reqMayBeUnknown = "may_be_unknown"
	reqUnsupported  = "unsupported"
	reqUnknown      = "unknown"
)

// observation is one contract observation: a field and what each device
// must record there.
type observation struct {
	index       int // position in /contract/observations
	name, scope string
	field       string
	byDevice    map[string]string // "cpu", "cuda" -> requirement
}

// contractTerms are the enforced terms of the frozen contract.
type contractTerms struct {
	ID           string
	SHA256       string
	Blocks       int
	OutputTokens int
	Prompts      []string
	// PromptTokens are the prompts' declared lengths (0: none declared)
	// and PromptRule, PromptSeparator the rule that makes them; "" when
	// the contract has no prompt_rule.
	PromptTokens []int
	// WhereHeld marks the prompts declared context where-held: they run
	// only where the model's context holds prompt tokens + output tokens -
	// 1 positions (contracts.PromptsFor), the others everywhere.
	WhereHeld       []bool
	PromptRule      string
	PromptSeparator string
	WarmupPromptID  string
	WarmupTokens    int // -1 when the contract does not state it
	// Policies are the eviction policies the contract admits: its
	// cache.policy, then any cache.policies it declares.
	Policies     []string
	Observations []observation
	// problems name terms that are missing or that this verifier cannot
	// enforce, as (pointer, expected) pairs.
	problems [][2]string
}

func readContractTerms(d *doc) *contractTerms {
	t := &contractTerms{}
	bad := func(p, want string) { t.problems = append(t.problems, [2]string{p, want}) }
	t.ID = d.str("/id")
	t.SHA256 = d.str("/sha256")
	if _, err := resolve(d.tree, "/contract"); err != nil {
		bad("/contract", "the contract object")
		return t
	}
	if id := d.str("/contract/id"); id != t.ID || id == "" {
		bad("/contract/id", "the contract id "+strconv.Quote(t.ID))
	}
	var ok bool
	if t.Blocks, ok = intAt(d.tree, "/contract/blocks"); !ok || t.Blocks < 1 {
		bad("/contract/blocks", "an integer >= 1")
	}
	if t.OutputTokens, ok = intAt(d.tree, "/contract/output_tokens"); !ok || t.OutputTokens < 1 {
		bad("/contract/output_tokens", "an integer >= 1")
	}
	if d.str("/contract/selection") != "greedy" {
		bad("/contract/selection", `"greedy" (this verifier checks greedy streams)`)
	}
	if d.str("/contract/eos") != "suppressed" {
		bad("/contract/eos", `"suppressed" (this verifier checks that no EOS is produced)`)
	}
	if ps, err := resolve(d.tree, "/contract/prompts"); err == nil {
		arr, _ := ps.([]any)
		for i := range arr {
			id, _ := resolve(arr[i], "/id")
			s, _ := id.(string)
			t.Prompts = append(t.Prompts, s)
		}
	}
	if len(t.Prompts) == 0 {
		bad("/contract/prompts", "a non-empty list of {id}")
	}
	if _, err := resolve(d.tree, "/contract/prompt_rule"); err == nil {
		t.PromptRule, t.PromptSeparator = d.str("/contract/prompt_rule/id"), d.str("/contract/prompt_rule/separator")
		if t.PromptRule != ruleRepeatTruncateV1 {
			bad("/contract/prompt_rule/id", strconv.Quote(ruleRepeatTruncateV1)+" (the prompt rule this verifier rebuilds)")
		}
	}
	for i := range t.Prompts {
		n, ok := intAt(d.tree, "/contract/prompts/"+strconv.Itoa(i)+"/tokens")
		switch {
		case t.PromptRule != "" && (!ok || n < 1):
			bad("/contract/prompts/"+strconv.Itoa(i)+"/tokens", "the prompt's declared length (an integer >= 1) under the prompt rule")
		case t.PromptRule == "" && ok:
			bad("/contract/prompts/"+strconv.Itoa(i)+"/tokens", "no declared length without a prompt_rule")
		}
		t.PromptTokens = append(t.PromptTokens, n)
		ctx, err := resolve(d.tree, "/contract/prompts/"+strconv.Itoa(i)+"/context")
		switch {
		case err != nil || ctx == "required":
			t.WhereHeld = append(t.WhereHeld, false)
		case ctx == "where-held" && t.PromptRule != "":
			t.WhereHeld = append(t.WhereHeld, true)
		default:
			bad("/contract/prompts/"+strconv.Itoa(i)+"/context", `"required" or "where-held" (with a prompt_rule)`)
			t.WhereHeld = append(t.WhereHeld, false)
		}
	}
	t.WarmupPromptID = d.str("/contract/warmup/prompt/id")
	if t.WarmupTokens, ok = intAt(d.tree, "/contract/warmup/output_tokens"); !ok || t.WarmupTokens < 0 {
		bad("/contract/warmup/output_tokens", "an integer >= 0")
		t.WarmupTokens = -1 // not a term: the warmup's length is not checked
	}
	if x, _ := resolve(d.tree, "/contract/warmup/excluded"); x != true {
		bad("/contract/warmup/excluded", "true (a warmup is never measured)")
	}
	if p := d.str("/contract/cache/policy"); p != "" {
		t.Policies = append(t.Policies, p)
	} else {
		bad("/contract/cache/policy", "the eviction policy the contract prescribes")
	}
	if ps, err := resolve(d.tree, "/contract/cache/policies"); err == nil {
		arr, ok := ps.([]any)
		if !ok {
			bad("/contract/cache/policies", "a list of policy names")
		}
		for _, x := range arr {
			if s, ok := x.(string); ok && s != "" {
				t.Policies = append(t.Policies, s)
			} else {
				bad("/contract/cache/policies", "a list of policy names")
			}
		}
	}
	obs, err := resolve(d.tree, "/contract/observations")
	if err != nil {
		bad("/contract/observations", "the list of required observations")
	}
	arr, _ := obs.([]any)
	for i, o := range arr {
		m, _ := o.(map[string]any)
		str := func(k string) string { s, _ := m[k].(string); return s }
		t.Observations = append(t.Observations, observation{
			index: i, name: str("name"), scope: str("scope"), field: str("field"),
			byDevice: map[string]string{"cpu": str("cpu"), "cuda": str("cuda")},
		})
	}
	return t
}

// admitsPolicy reports whether the contract admits eviction policy p.
func (t *contractTerms) admitsPolicy(p string) bool { return slices.Contains(t.Policies, p) }

// ruleRepeatTruncateV1 is contracts.RepeatTruncateV1, the rule of declared
// prompt lengths: the first L ids of the encoding of the text repeated k
// times, joined by the separator, k the smallest count that reaches L.
const ruleRepeatTruncateV1 = "repeat-truncate-v1"

// declaredLengths reports whether the contract declares its prompts'
// lengths (a prompt_rule): a prefill-by-length contract (PERF-PREFILL-v1).
func (t *contractTerms) declaredLengths() bool { return t != nil && t.PromptRule != "" }

// decodeByPrompt reports whether the contract's configuration documents
// carry decode per prompt (/metrics/decode_depths: PERF-DEPTH-v1):
// declared prompt lengths and a decode interval (N >= 2).
func (t *contractTerms) decodeByPrompt() bool { return t.declaredLengths() && t.OutputTokens >= 2 }

// runs is the positions in t.Prompts of the prompts a block runs on a
// model with maxPositions positions (setup.model.max_positions): every
// required prompt, and each where-held one whose request fits (declared
// tokens + output tokens - 1 <= maxPositions); all of them when
// maxPositions is 0 (not recorded).
func (t *contractTerms) runs(maxPositions int) []int {
	var out []int
	for i := range t.Prompts {
		held := i < len(t.WhereHeld) && t.WhereHeld[i]
		if !held || maxPositions <= 0 || (i < len(t.PromptTokens) && t.PromptTokens[i]+t.OutputTokens-1 <= maxPositions) {
			out = append(out, i)
		}
	}
	return out
}

// campaignConfig is one configuration the campaign declares.
type campaignConfig struct {
	index                  int
	id                     string
	capacity               int
	hasCapacity            bool
	executor, seedExecutor string
	placement, policy      string
	kv                     string // "" when not declared (fp32)
	expertAct              string // expert_activations; "" when not declared (fp32)
	denseAct               string // dense_activations; "" when not declared (fp32)
}

// campaignConfigs returns the configurations campaign.json declares, and
// false when it declares none that can be read.
func campaignConfigs(d *doc) ([]campaignConfig, bool) {
	if d == nil || d.tree == nil {
		return nil, false
	}
	v, err := resolve(d.tree, "/campaign/configurations")
	if err != nil {
		return nil, false
	}
	arr, ok := v.([]any)
	if !ok || len(arr) == 0 {
		return nil, false
	}
	var out []campaignConfig
	for i, c := range arr {
		m, _ := c.(map[string]any)
		str := func(k string) string { s, _ := m[k].(string); return s }
		cc := campaignConfig{index: i, id: str("id"), executor: str("executor"), seedExecutor: str("seed_executor"),
			placement: str("placement"), policy: str("policy"), kv: str("kv"), expertAct: str("expert_activations"),
			denseAct: str("dense_activations")}
		cc.capacity, cc.hasCapacity = asInt(m["capacity"])
		if cc.id == "" {
			return nil, false
		}
		out = append(out, cc)
	}
	return out, true
}

// intAt reads an integer at pointer p.
func intAt(tree any, p string) (int, bool) {
	v, err := resolve(tree, p)
	if err != nil {
		return 0, false
	}
	return asInt(v)
}

func asInt(v any) (int, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := strconv.ParseInt(string(n), 10, 32)
	if err != nil {
		return 0, false
	}
	return int(i), true
}
