package verifier

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
	"github.com/horizon-runmap/horizon/ifeval"
)

// The verifier's own recomputation of an IFEval edition. It shares the
// scorer (package ifeval: the rule set the contract names) with the
// writer, and nothing else: the population, the shard terms, the sums, the
// claims and the byte-level decoding are written again here from the
// contract and the edition's documents, so that a bug in
// campaigns/report cannot hide itself.

// ifevalPopulation is the contract's scored prompts: the embedded official
// input, checked against the contract's hash, cut to its subset, checked
// against its declared counts.
func ifevalPopulation(k *contracts.IFEval) ([]ifeval.Input, error) {
	if k.Input.SHA256 != ifeval.OfficialInputSHA256 {
		return nil, fmt.Errorf("the contract pins input sha256 %s; the official input this verifier embeds is %s", k.Input.SHA256, ifeval.OfficialInputSHA256)
	}
	all, err := ifeval.OfficialInputs()
	if err != nil {
		return nil, err
	}
	if k.Input.First > len(all) {
		return nil, fmt.Errorf("input.first %d: the input has %d prompts", k.Input.First, len(all))
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
		return nil, fmt.Errorf("the contract declares %d prompts and %d instructions; the official input gives %d and %d", k.Input.Prompts, k.Input.Instructions, len(ins), n)
	}
	return ins, nil
}

func sha256Text(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// shardProblem is the first way a shard breaks the contract, "" when none.
func shardProblem(k *contracts.IFEval, ksum string, ins []ifeval.Input, id string, shard int, s *editions.IFEvalShard) string {
	lo, hi := k.ShardRange(shard)
	switch {
	case s.Shard != shard || s.ConfigID != id:
		return fmt.Sprintf("the record says configuration %s shard %d", s.ConfigID, s.Shard)
	case s.Contract.ID != k.ID || s.Contract.SHA256 != ksum:
		return fmt.Sprintf("generated under contract %s %.12s, the edition's is %s %.12s", s.Contract.ID, s.Contract.SHA256, k.ID, ksum)
	case s.Setup.MaxNewTokens != k.MaxNewTokens:
		return fmt.Sprintf("max_new_tokens %d, the contract's %d", s.Setup.MaxNewTokens, k.MaxNewTokens)
	case k.PromptFormat == contracts.FormatRaw && s.Setup.PromptFormat != contracts.FormatRaw:
		return fmt.Sprintf("prompt format %s where the contract prescribes raw", s.Setup.PromptFormat)
	case (s.Setup.PromptFormat == contracts.FormatChatTemplate) != (s.Setup.ChatTemplateSHA256 != ""):
		return fmt.Sprintf("prompt format %s with chat template sha256 %q", s.Setup.PromptFormat, s.Setup.ChatTemplateSHA256)
	case len(s.Setup.Model.EOSTokenIDs) == 0:
		return "no EOS ids recorded"
	case len(s.Responses) != hi-lo:
		return fmt.Sprintf("%d responses; the shard holds prompts %d..%d of the contract", len(s.Responses), lo, hi-1)
	}
	eos := s.Setup.Model.EOSTokenIDs
	for j, r := range s.Responses {
		in := ins[lo+j]
		n := len(r.TokenIDs)
		switch {
		case r.Key != in.Key || r.PromptSHA256 != sha256Text(in.Prompt):
			return fmt.Sprintf("response %d is key %d (prompt sha256 %.12s), the contract's prompt %d is key %d", j, r.Key, r.PromptSHA256, lo+j, in.Key)
		case len(r.PromptTokenIDs) == 0:
			return fmt.Sprintf("key %d has no prompt tokens", r.Key)
		case n == 0 || n > k.MaxNewTokens:
			return fmt.Sprintf("key %d: %d tokens, want 1..%d", r.Key, n, k.MaxNewTokens)
		case r.Seconds <= 0:
			return fmt.Sprintf("key %d: %v seconds", r.Key, r.Seconds)
		}
		for i, t := range r.TokenIDs[:n-1] {
			if slices.Contains(eos, t) {
				return fmt.Sprintf("key %d: EOS id %d at token %d of %d; generation ends at EOS", r.Key, t, i, n)
			}
		}
		last := slices.Contains(eos, r.TokenIDs[n-1])
		switch {
		case r.Ending == contracts.EndingEOS && !last:
			return fmt.Sprintf("key %d: ending eos, but the last token %d is not an EOS id %v", r.Key, r.TokenIDs[n-1], eos)
		case r.Ending == contracts.EndingLength && (last || n != k.MaxNewTokens):
			return fmt.Sprintf("key %d: ending length with %d tokens (last an EOS id: %v)", r.Key, n, last)
		case r.Ending != contracts.EndingEOS && r.Ending != contracts.EndingLength:
			return fmt.Sprintf("key %d: ending %q", r.Key, r.Ending)
		}
	}
	return ""
}

// expectedConfig recomputes a configuration document from its shards.
func expectedConfig(ins []ifeval.Input, id string, shards []*editions.IFEvalShard) (editions.IFEvalConfig, error) {
	d := editions.IFEvalConfig{Schema: editions.SchemaIFEvalConfig, Version: editions.Version, ID: id, Rules: ifeval.Rules.Version,
		Checkpoint: shards[0].Checkpoint, PromptFormat: shards[0].Setup.PromptFormat,
		Endings: map[string]int{contracts.EndingEOS: 0, contracts.EndingLength: 0}, Verdicts: []editions.IFEvalVerdict{}}
	resp := map[string]string{}
	i := 0
	for s, sh := range shards {
		d.Shards = append(d.Shards, editions.IFEvalShardPath(id, s+1))
		for _, r := range sh.Responses {
			resp[ins[i].Prompt] = r.Text
			i++
			d.Endings[r.Ending]++
			d.Tokens += int64(len(r.TokenIDs))
			d.Seconds += r.Seconds
		}
	}
	if d.Seconds > 0 {
		d.TokS = float64(d.Tokens) / d.Seconds
	}
	rep, err := ifeval.Score(ins, resp)
	if err != nil {
		return d, err
	}
	if len(rep.Missing) > 0 {
		return d, fmt.Errorf("no response to keys %v", rep.Missing)
	}
	conv := func(a ifeval.Accuracy) editions.IFEvalAccuracy {
		r := func(x ifeval.Ratio) editions.IFEvalRatio {
			return editions.IFEvalRatio{Followed: x.Followed, Total: x.Total}
		}
		out := editions.IFEvalAccuracy{PromptLevel: r(a.Prompt), InstructionLevel: r(a.Instruction),
			ByCategory: map[string]editions.IFEvalRatio{}, ByInstruction: map[string]editions.IFEvalRatio{}}
		for k, v := range a.ByCategory {
			out.ByCategory[k] = r(v)
		}
		for k, v := range a.ByInstruction {
			out.ByInstruction[k] = r(v)
		}
		return out
	}
	d.Prompts, d.Instructions = rep.Strict.Prompt.Total, rep.Strict.Instruction.Total
	d.Strict, d.Loose = conv(rep.Strict), conv(rep.Loose)
	for _, p := range rep.Prompts {
		d.Verdicts = append(d.Verdicts, editions.IFEvalVerdict{Key: p.Key, InstructionIDList: p.InstructionIDList, Strict: p.Strict, Loose: p.Loose})
	}
	return d, nil
}

// ifevalClaimMetrics are the claims each configuration must carry, in order,
// with their numerator and denominator.
var ifevalClaimMetrics = []struct {
	metric string
	of     func(d *editions.IFEvalConfig) (num, den float64)
}{
	{"prompt_level_strict", func(d *editions.IFEvalConfig) (float64, float64) {
		return float64(d.Strict.PromptLevel.Followed), float64(d.Strict.PromptLevel.Total)
	}},
	{"instruction_level_strict", func(d *editions.IFEvalConfig) (float64, float64) {
		return float64(d.Strict.InstructionLevel.Followed), float64(d.Strict.InstructionLevel.Total)
	}},
	{"prompt_level_loose", func(d *editions.IFEvalConfig) (float64, float64) {
		return float64(d.Loose.PromptLevel.Followed), float64(d.Loose.PromptLevel.Total)
	}},
	{"instruction_level_loose", func(d *editions.IFEvalConfig) (float64, float64) {
		return float64(d.Loose.InstructionLevel.Followed), float64(d.Loose.InstructionLevel.Total)
	}},
	{"response_tok_s", func(d *editions.IFEvalConfig) (float64, float64) { return float64(d.Tokens), d.Seconds }},
}

// expectedClaims are the claims the configuration documents give, with the
// campaign's evidence and publication.
func expectedClaims(edition, evidence, publication string, docs []editions.IFEvalConfig) editions.IFEvalClaims {
	out := editions.IFEvalClaims{Schema: editions.SchemaIFEvalClaims, Version: editions.Version, Edition: edition, Claims: []editions.IFEvalClaim{}}
	for i := range docs {
		d := &docs[i]
		for _, m := range ifevalClaimMetrics {
			num, den := m.of(d)
			v := 0.0
			if den > 0 {
				v = num / den
			}
			out.Claims = append(out.Claims, editions.IFEvalClaim{ID: d.ID + "." + m.metric, Config: d.ID, Metric: m.metric, Value: v,
				Numerator: num, Denominator: den, Evidence: evidence, Publication: publication, Synthetic: d.Checkpoint.Kind == "synthetic"})
		}
	}
	return out
}

// byteLevelText decodes token ids as a synthetic checkpoint's byte-level
// tokenizer does: ids 0..255 are bytes, EOS ids are nothing, any other id
// is "<|id|>"; then every maximal ill-formed subsequence of the bytes
// becomes one U+FFFD (Unicode's "substitution of maximal subparts", as
// Hugging Face's ByteLevel decoder does).
func byteLevelText(ids, eos []int) string {
	var raw []byte
	for _, id := range ids {
		switch {
		case id >= 0 && id < 256:
			raw = append(raw, byte(id))
		case slices.Contains(eos, id):
		default:
			raw = append(raw, "<|"+strconv.Itoa(id)+"|>"...)
		}
	}
	var b strings.Builder
	for i := 0; i < len(raw); {
		c := raw[i]
		if c < 0x80 {
			b.WriteByte(c)
			i++
			continue
		}
		n, lo, hi := 0, byte(0x80), byte(0xBF) // continuation bytes after the lead, and the first one's range
		switch {
		case c >= 0xC2 && c <= 0xDF:
			n = 1
		case c == 0xE0:
			n, lo = 2, 0xA0
		case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
			n = 2
		case c == 0xED:
			n, hi = 2, 0x9F
		case c == 0xF0:
			n, lo = 3, 0x90
		case c >= 0xF1 && c <= 0xF3:
			n = 3
		case c == 0xF4:
			n, hi = 3, 0x8F
		}
		j := i + 1
		for m := 0; m < n && j < len(raw); m++ {
			l, h := byte(0x80), byte(0xBF)
			if m == 0 {
				l, h = lo, hi
			}
			if raw[j] < l || raw[j] > h {
				break
			}
			j++
		}
		if n > 0 && j == i+1+n {
			b.Write(raw[i:j])
		} else {
			b.WriteRune(utf8.RuneError)
		}
		i = j
	}
	return b.String()
}
