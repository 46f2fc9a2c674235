package ifeval

import (
	"fmt"
	"sort"
	"strings"
)

// Variants returns the reference's loose variants of a response, in its
// order: the response; with every '*' removed; with the first line removed;
// the last line removed; both; and each of the last three with '*' removed.
// Lines are split at "\n" and a variant with a line removed is stripped.
func Variants(response string) [8]string {
	r := splitLines(response)
	first := pyStrip(strings.Join(r[1:], "\n"))
	last := pyStrip(strings.Join(r[:len(r)-1], "\n"))
	both := ""
	if len(r) > 2 {
		both = pyStrip(strings.Join(r[1:len(r)-1], "\n"))
	}
	star := func(s string) string { return strings.ReplaceAll(s, "*", "") }
	return [8]string{response, star(response), first, last, both, star(first), star(last), star(both)}
}

// PromptResult is one prompt's verdicts, one per instruction.
type PromptResult struct {
	Key               int      `json:"key"`
	InstructionIDList []string `json:"instruction_id_list"`
	Strict            []bool   `json:"strict"`
	Loose             []bool   `json:"loose"`
}

// Checkers builds the checkers of one input's instructions.
func Checkers(in Input) ([]Checker, error) {
	cs := make([]Checker, len(in.InstructionIDList))
	for i, id := range in.InstructionIDList {
		c, err := NewChecker(id, in.Kwargs[i])
		if err != nil {
			return nil, fmt.Errorf("key %d instruction %d: %w", in.Key, i, err)
		}
		cs[i] = c
	}
	return cs, nil
}

// Evaluate scores one response against one input, strict and loose. As in
// the reference, a response that is blank after stripping follows nothing.
func Evaluate(in Input, response string) (PromptResult, error) {
	cs, err := Checkers(in)
	if err != nil {
		return PromptResult{}, err
	}
	res := PromptResult{
		Key:               in.Key,
		InstructionIDList: in.InstructionIDList,
		Strict:            make([]bool, len(cs)),
		Loose:             make([]bool, len(cs)),
	}
	vs := Variants(response)
	for i, c := range cs {
		res.Strict[i] = pyStrip(response) != "" && c(response)
		for _, v := range vs {
			if pyStrip(v) != "" && c(v) {
				res.Loose[i] = true
				break
			}
		}
	}
	return res, nil
}

// Ratio is a count of followed out of a total.
type Ratio struct {
	Followed int `json:"followed"`
	Total    int `json:"total"`
}

// Percent is 100 * Followed / Total, 0 for an empty total.
func (r Ratio) Percent() float64 {
	if r.Total == 0 {
		return 0
	}
	return 100 * float64(r.Followed) / float64(r.Total)
}

func (r Ratio) String() string {
	return fmt.Sprintf("%d/%d (%.2f%%)", r.Followed, r.Total, r.Percent())
}

// Accuracy is the four IFEval numbers for one mode (strict or loose), with
// the reference's two breakdowns: by category (tier 0) and by instruction
// id (tier 1).
type Accuracy struct {
	Prompt        Ratio            `json:"prompt_level"`
	Instruction   Ratio            `json:"instruction_level"`
	ByCategory    map[string]Ratio `json:"by_category"`
	ByInstruction map[string]Ratio `json:"by_instruction"`
}

// Report is a scored response file.
type Report struct {
	Rules   string         `json:"rules"`
	Strict  Accuracy       `json:"strict"`
	Loose   Accuracy       `json:"loose"`
	Prompts []PromptResult `json:"prompts"`
	// Missing are the keys of inputs without a response, left out of every
	// denominator.
	Missing []int `json:"missing"`
}

// Score evaluates every input that has a response, in input order.
func Score(inputs []Input, responses map[string]string) (*Report, error) {
	rep := &Report{Rules: Rules.Version, Missing: []int{}, Prompts: []PromptResult{}}
	for _, in := range inputs {
		resp, ok := responses[in.Prompt]
		if !ok {
			rep.Missing = append(rep.Missing, in.Key)
			continue
		}
		res, err := Evaluate(in, resp)
		if err != nil {
			return nil, err
		}
		rep.Prompts = append(rep.Prompts, res)
	}
	rep.Strict = accuracy(rep.Prompts, func(p PromptResult) []bool { return p.Strict })
	rep.Loose = accuracy(rep.Prompts, func(p PromptResult) []bool { return p.Loose })
	return rep, nil
}

func accuracy(ps []PromptResult, verdicts func(PromptResult) []bool) Accuracy {
	a := Accuracy{ByCategory: map[string]Ratio{}, ByInstruction: map[string]Ratio{}}
	add := func(m map[string]Ratio, k string, ok bool) {
		r := m[k]
		r.Total++
		if ok {
			r.Followed++
		}
		m[k] = r
	}
	for _, p := range ps {
		all := true
		for i, ok := range verdicts(p) {
			id := p.InstructionIDList[i]
			a.Instruction.Total++
			if ok {
				a.Instruction.Followed++
			}
			all = all && ok
			add(a.ByCategory, Category(id), ok)
			add(a.ByInstruction, id, ok)
		}
		a.Prompt.Total++
		if all {
			a.Prompt.Followed++
		}
	}
	return a
}

// SortedKeys returns a breakdown's keys in order, for deterministic output.
func SortedKeys(m map[string]Ratio) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
