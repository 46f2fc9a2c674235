package ifeval

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// officialInput is the official IFEval prompts file, input_data.jsonl
// (541 prompts, 834 instructions), byte for byte; data/SOURCE.md gives its
// origin and OfficialInputSHA256 its digest.
//
//go:embed data/input_data.jsonl
var officialInput []byte

// OfficialInputSHA256 is the sha256 of the embedded input_data.jsonl.
const OfficialInputSHA256 = "67ffeee0fcb87c317c5b08a2de85557b4a7e96ada6178aa645b4954fe4b53d49"

// An Input is one prompt of input_data.jsonl with its instructions.
type Input struct {
	Key               int      `json:"key"`
	Prompt            string   `json:"prompt"`
	InstructionIDList []string `json:"instruction_id_list"`
	Kwargs            []Kwargs `json:"kwargs"`
}

// A Response is one row of a response file: the prompt, verbatim, and the
// model's response (the reference's input_response_data format).
type Response struct {
	Prompt   string `json:"prompt"`
	Response string `json:"response"`
}

// OfficialInputs parses the embedded official input.
func OfficialInputs() ([]Input, error) { return ReadInputs(bytes.NewReader(officialInput)) }

// OfficialInputBytes returns a copy of the embedded input_data.jsonl.
func OfficialInputBytes() []byte { return bytes.Clone(officialInput) }

// ReadInputs parses an input_data.jsonl stream: one JSON object per
// non-blank line, unknown fields rejected, every instruction id known and
// one kwargs object per instruction.
func ReadInputs(r io.Reader) ([]Input, error) {
	var out []Input
	err := eachLine(r, func(n int, line []byte) error {
		var in Input
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		if len(in.Kwargs) != len(in.InstructionIDList) {
			return fmt.Errorf("line %d (key %d): %d instruction ids but %d kwargs", n, in.Key, len(in.InstructionIDList), len(in.Kwargs))
		}
		for _, id := range in.InstructionIDList {
			if _, ok := registry[id]; !ok {
				return fmt.Errorf("line %d (key %d): %q: %w", n, in.Key, id, ErrUnknownInstruction)
			}
		}
		out = append(out, in)
		return nil
	})
	return out, err
}

// ReadResponses parses a response JSONL stream of {"prompt", "response"}
// rows; other fields are ignored, as the reference ignores them. A later row
// for the same prompt replaces an earlier one, as in the reference's dict.
func ReadResponses(r io.Reader) (map[string]string, error) {
	out := map[string]string{}
	err := eachLine(r, func(n int, line []byte) error {
		var row struct {
			Prompt   *string `json:"prompt"`
			Response *string `json:"response"`
		}
		if err := json.Unmarshal(line, &row); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		if row.Prompt == nil || row.Response == nil {
			return fmt.Errorf("line %d: a row needs string fields \"prompt\" and \"response\"", n)
		}
		out[*row.Prompt] = *row.Response
		return nil
	})
	return out, err
}

func eachLine(r io.Reader, f func(n int, line []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Bytes()
		if strings.TrimSpace(string(line)) == "" {
			continue
		}
		if err := f(n, line); err != nil {
			return err
		}
	}
	return sc.Err()
}
