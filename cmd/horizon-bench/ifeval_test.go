package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const gpt4Responses = "../../ifeval/testdata/input_response_data_gpt4_20231107_145030.jsonl"

func TestIfevalScoreText(t *testing.T) {
	r := run(t, "ifeval", "score", "--responses", gpt4Responses)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{
		"prompt-level strict       417/540 (77.22%)",
		"instruction-level strict  697/832 (83.77%)",
		"prompt-level loose        431/540 (79.81%)",
		"instruction-level loose   714/832 (85.82%)",
		"punctuation            44/66 (66.67%)",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if !strings.Contains(r.stderr, "keys [2785]") {
		t.Errorf("stderr does not name the prompt without a response: %q", r.stderr)
	}
}

func TestIfevalScoreJSON(t *testing.T) {
	dir := t.TempDir()
	// Two prompts of the official input: key 1001 (no commas) answered
	// with a comma, and key 1000 left out.
	resp := filepath.Join(dir, "r.jsonl")
	row, _ := json.Marshal(map[string]string{
		"prompt":   "I am planning a trip to Japan, and I would like thee to write an itinerary for my journey in a Shakespearean style. You are not allowed to use any commas in your response.",
		"response": "Hark, a journey.",
	})
	must(t, os.WriteFile(resp, append(row, '\n'), 0o644))
	r := run(t, "ifeval", "score", "--responses", resp, "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var rep struct {
		Rules  string
		Strict struct {
			Prompt struct{ Followed, Total int } `json:"prompt_level"`
		}
		Prompts []struct {
			Key               int
			InstructionIDList []string `json:"instruction_id_list"`
			Strict, Loose     []bool
		}
		Missing []int
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if rep.Rules != "ifeval-go-v2" || rep.Strict.Prompt.Total != 1 || rep.Strict.Prompt.Followed != 0 || len(rep.Missing) != 540 {
		t.Errorf("report %+v", rep)
	}
	if len(rep.Prompts) != 1 || rep.Prompts[0].Key != 1001 || rep.Prompts[0].InstructionIDList[0] != "punctuation:no_comma" || rep.Prompts[0].Strict[0] || rep.Prompts[0].Loose[0] {
		t.Errorf("prompts %+v", rep.Prompts)
	}
	if r := run(t, "ifeval", "score", "--responses", resp, "--require-all"); r.code != 1 || !strings.Contains(r.stderr, "--require-all") {
		t.Errorf("--require-all: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestIfevalUsageErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	must(t, os.WriteFile(bad, []byte("{not json\n"), 0o644))
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"missing responses", []string{"ifeval", "score"}, "--responses FILE is required"},
		{"unreadable", []string{"ifeval", "score", "--responses", filepath.Join(dir, "none.jsonl")}, "no such file"},
		{"malformed", []string{"ifeval", "score", "--responses", bad}, "line 1"},
		{"bad input", []string{"ifeval", "score", "--responses", gpt4Responses, "--input", bad}, "line 1"},
		{"bad flag", []string{"ifeval", "score", "--bogus"}, "flag provided but not defined"},
		{"unknown subcommand", []string{"ifeval", "grade"}, "unknown ifeval command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, tc.args...)
			if r.code != 2 || !strings.Contains(r.stderr, tc.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
				t.Errorf("exit %d, stderr %q; want 2 and one line with %q", r.code, r.stderr, tc.want)
			}
		})
	}
}

func TestIfevalHelp(t *testing.T) {
	r := run(t, "ifeval", "score", "--help")
	if r.code != 0 || !strings.Contains(r.stdout, "Example:") || !strings.Contains(r.stdout, "--require-all") {
		t.Errorf("help: exit %d\n%s", r.code, r.stdout)
	}
}
