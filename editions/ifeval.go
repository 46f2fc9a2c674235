package editions

import "strconv"

// IFEval editions (contracts IFEVAL-v1, IFEVAL-SMOKE-v1) share the edition
// layout (manifest, campaign.json, contract.json, claims.json, reports) and
// keep their own documents:
//
//	raw/<config>/shard-<k>.json   IFEvalShard: one worker's responses
//	configs/<config>.json         IFEvalConfig: scores, verdicts, endings
//	claims.json                   IFEvalClaims: the four accuracies per configuration
const (
	// SchemaIFEvalContract is the frozen contract.json of an IFEval edition
	// (an editions.ContractDoc whose contract is a contracts.IFEval).
	SchemaIFEvalContract = "horizon.ifeval-contract"
	SchemaIFEvalShard    = "horizon.ifeval-shard"
	SchemaIFEvalConfig   = "horizon.ifeval-config"
	SchemaIFEvalClaims   = "horizon.ifeval-claims"
)

// IFEvalShardPath is raw/<config>/shard-<k>.json (k counts from 1).
func IFEvalShardPath(configID string, shard int) string {
	return "raw/" + configID + "/shard-" + strconv.Itoa(shard) + ".json"
}

// IFEvalShard is one worker's record: the responses to its shard of the
// contract's prompts, in file order.
type IFEvalShard struct {
	Schema     string      `json:"schema"`  // SchemaIFEvalShard
	Version    int         `json:"version"` // Version
	Edition    string      `json:"edition"`
	ConfigID   string      `json:"config_id"`
	Shard      int         `json:"shard"` // 1..contract shards
	Contract   ContractRef `json:"contract"`
	StartedAt  string      `json:"started_at"`
	FinishedAt string      `json:"finished_at"`

	Environment Environment   `json:"environment"`
	Checkpoint  Checkpoint    `json:"checkpoint"`
	Artifact    ArtifactRef   `json:"artifact"`
	Setup       IFEvalSetup   `json:"setup"`
	Preparation Preparation   `json:"preparation"`
	Responses   []IFEvalReply `json:"responses"`
}

// IFEvalSetup is what shaped the responses besides the weights.
type IFEvalSetup struct {
	Model     Model  `json:"model"`
	Capacity  int    `json:"capacity"`
	Executor  string `json:"executor"`
	Placement string `json:"placement"`
	Policy    string `json:"policy"`
	StepMode  string `json:"step_mode"`
	// Prefill is how each prompt ran: "token" or "batched" (Setup.Prefill);
	// shards from before the field omit it, which means token.
	Prefill string `json:"prefill,omitempty"`
	// PromptFormat is what was used: chat_template, or raw (the contract's
	// format when it is raw, or a checkpoint without a chat template).
	PromptFormat string `json:"prompt_format"`
	// ChatTemplateSHA256 is the template source's SHA-256 ("" for raw).
	ChatTemplateSHA256 string `json:"chat_template_sha256"`
	TokenizerSHA256    string `json:"tokenizer_sha256"`
	MaxNewTokens       int    `json:"max_new_tokens"`
}

// IFEvalReply is one prompt's response.
type IFEvalReply struct {
	Key int `json:"key"` // the input's key
	// PromptSHA256 is the SHA-256 of the prompt text the input holds.
	PromptSHA256 string `json:"prompt_sha256"`
	// PromptTokenIDs is the rendered prompt as the model saw it.
	PromptTokenIDs []int `json:"prompt_token_ids"`
	// TokenIDs are the generated ids; with ending eos the last is an EOS id.
	TokenIDs []int `json:"token_ids"`
	// Text is the response the scorer reads: the generated ids decoded
	// without special tokens (the EOS id included in TokenIDs adds nothing).
	Text   string `json:"text"`
	Ending string `json:"ending"` // contracts.EndingEOS or EndingLength
	// Seconds is admission to the last token (engine.Result.RuntimeSeconds).
	Seconds float64 `json:"seconds"`
}

// IFEvalConfig is one configuration's scores, recomputable from its shards.
type IFEvalConfig struct {
	Schema     string     `json:"schema"`  // SchemaIFEvalConfig
	Version    int        `json:"version"` // Version
	ID         string     `json:"id"`
	Checkpoint Checkpoint `json:"checkpoint"`
	Shards     []string   `json:"shards"` // raw paths, in shard order
	// Rules is the scorer's rule set version (package ifeval).
	Rules        string `json:"rules"`
	PromptFormat string `json:"prompt_format"`
	Prompts      int    `json:"prompts"`
	Instructions int    `json:"instructions"`
	// Strict and Loose are the accuracies with their breakdowns.
	Strict IFEvalAccuracy `json:"strict"`
	Loose  IFEvalAccuracy `json:"loose"`
	// Endings counts responses by ending.
	Endings map[string]int `json:"endings"`
	// Tokens and Seconds are summed over every response; TokS is their
	// ratio (response_tok_s).
	Tokens  int64   `json:"tokens"`
	Seconds float64 `json:"seconds"`
	TokS    float64 `json:"tok_s"`
	// Verdicts are every prompt's, in file order.
	Verdicts []IFEvalVerdict `json:"verdicts"`
}

// IFEvalRatio is followed out of total.
type IFEvalRatio struct {
	Followed int `json:"followed"`
	Total    int `json:"total"`
}

// IFEvalAccuracy is one mode's four numbers' half: prompt and instruction
// level, and the breakdowns by category and by instruction id.
type IFEvalAccuracy struct {
	PromptLevel      IFEvalRatio            `json:"prompt_level"`
	InstructionLevel IFEvalRatio            `json:"instruction_level"`
	ByCategory       map[string]IFEvalRatio `json:"by_category"`
	ByInstruction    map[string]IFEvalRatio `json:"by_instruction"`
}

// IFEvalVerdict is one prompt's verdicts, one per instruction.
type IFEvalVerdict struct {
	Key               int      `json:"key"`
	InstructionIDList []string `json:"instruction_id_list"`
	Strict            []bool   `json:"strict"`
	Loose             []bool   `json:"loose"`
}

// IFEvalClaims are the edition's claims: per configuration, each of the
// four accuracies and the response rate.
type IFEvalClaims struct {
	Schema  string        `json:"schema"`  // SchemaIFEvalClaims
	Version int           `json:"version"` // Version
	Edition string        `json:"edition"`
	Claims  []IFEvalClaim `json:"claims"`
}

// IFEvalClaim is one number of one configuration.
type IFEvalClaim struct {
	ID          string  `json:"id"` // <config>.<metric>
	Config      string  `json:"config"`
	Metric      string  `json:"metric"` // a contract metric id
	Value       float64 `json:"value"`
	Numerator   float64 `json:"numerator"`
	Denominator float64 `json:"denominator"`
	Evidence    string  `json:"evidence"`
	Publication string  `json:"publication"`
	// Synthetic says the checkpoint is synthetic: the accuracies measure
	// the pipeline, not a model.
	Synthetic bool `json:"synthetic"`
}
