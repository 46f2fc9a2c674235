package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/horizon-runmap/horizon/ifeval"
)

func ifevalCommand() *cli.Command {
	return &cli.Command{
		Name:      "ifeval",
		Usage:     "score instruction-following responses with IFEval (Zhou et al. 2023), as the Python reference does",
		UsageText: "horizon-bench ifeval score --responses FILE [--input FILE] [--json] [--require-all]",
		Subcommands: []*cli.Command{
			ifevalScoreCommand(),
		},
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return usageError("unknown ifeval command %q (horizon-bench ifeval --help lists them)", c.Args().First())
			}
			return cli.ShowSubcommandHelp(c)
		},
	}
}

func ifevalScoreCommand() *cli.Command {
	return &cli.Command{
		Name:      "score",
		Usage:     "score a JSONL file of {\"prompt\", \"response\"} rows against the IFEval prompts",
		UsageText: "horizon-bench ifeval score --responses FILE [--input FILE] [--json] [--require-all]",
		Description: `Reads the responses (one JSON object per line with string fields "prompt"
and "response", the reference's input_response_data format; other fields
are ignored) and matches each IFEval prompt to its response by the prompt's
exact text. The prompts are the official input_data.jsonl (541 prompts,
834 instructions, sha256 67ffeee0...4d49), embedded, unless --input names
another file in the same format.

Every instruction is checked strictly (the response as is) and loosely
(followed if any of the reference's 8 variants passes: the response, with
its first line, its last line or both removed, each also with every '*'
removed). Four accuracies come out, each as followed/total and percent:
prompt-level (all of a prompt's instructions followed) and
instruction-level, strict and loose; then one line per instruction
category. --json prints one JSON object instead: the rules version, the
accuracies with per-category and per-instruction breakdowns, and per
prompt {key, instruction_id_list, strict: [bool], loose: [bool]}.

Prompts without a response are named on stderr and left out of every
denominator; with --require-all they are an error (exit 1).

The checkers are a Go port of the reference's semantics (rules version
ifeval-go-v2; package ifeval documents each rule). On the GPT-4 responses
released with IFEval they agree with a reference run on 538/540 prompts
strict and 540/540 loose; the two disagreements are the prompts whose
letter is not a letter, where the reference draws a random one.

Example:

  horizon-bench ifeval score --responses responses.jsonl
  horizon-bench ifeval score --responses responses.jsonl --json --require-all > score.json

Exit codes: 0 scored; 1 prompts without a response under --require-all, or
an input whose instructions cannot be built; 2 usage (missing --responses,
an unreadable or malformed file, a bad flag).`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "responses", Usage: "JSONL `FILE` of {\"prompt\", \"response\"} rows (required)"},
			&cli.StringFlag{Name: "input", Usage: "IFEval prompts JSONL `FILE` (default: the embedded official input_data.jsonl)"},
			&cli.BoolFlag{Name: "json", Usage: "print the full report as JSON, per-prompt verdicts included"},
			&cli.BoolFlag{Name: "require-all", Usage: "fail (exit 1) if any prompt has no response"},
		},
		OnUsageError: onUsageError("horizon-bench ifeval score"),
		Action:       runIfevalScore,
	}
}

func runIfevalScore(c *cli.Context) error {
	if c.Args().Present() {
		return usageError("unexpected argument %q (the responses go in --responses FILE)", c.Args().First())
	}
	path := c.String("responses")
	if path == "" {
		return usageError("--responses FILE is required (see horizon-bench ifeval score --help)")
	}
	var inputs []ifeval.Input
	var err error
	if in := c.String("input"); in != "" {
		inputs, err = readIfevalFile(in, ifeval.ReadInputs)
	} else {
		inputs, err = ifeval.OfficialInputs()
	}
	if err != nil {
		return usageError("%v", err)
	}
	responses, err := readIfevalFile(path, ifeval.ReadResponses)
	if err != nil {
		return usageError("%v", err)
	}
	rep, err := ifeval.Score(inputs, responses)
	if err != nil {
		return cli.Exit(fmt.Sprintf("ifeval score: %v", err), 1)
	}
	if len(rep.Missing) > 0 {
		fmt.Fprintf(c.App.ErrWriter, "ifeval score: %d prompt(s) without a response, left out of the denominators: keys %v\n", len(rep.Missing), rep.Missing)
	}
	if c.Bool("json") {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		writeIfevalText(c.App.Writer, rep)
	}
	if len(rep.Missing) > 0 && c.Bool("require-all") {
		return cli.Exit(fmt.Sprintf("ifeval score: --require-all: %d prompt(s) without a response (keys %v); add a row for each to %s", len(rep.Missing), rep.Missing, path), 1)
	}
	return nil
}

func readIfevalFile[T any](path string, parse func(io.Reader) (T, error)) (T, error) {
	var zero T
	f, err := os.Open(path)
	if err != nil {
		return zero, err
	}
	defer f.Close()
	v, err := parse(f)
	if err != nil {
		return zero, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

func writeIfevalText(w io.Writer, rep *ifeval.Report) {
	fmt.Fprintf(w, "IFEval (%s), %d prompts scored\n", rep.Rules, rep.Strict.Prompt.Total)
	fmt.Fprintf(w, "prompt-level strict       %v\n", rep.Strict.Prompt)
	fmt.Fprintf(w, "instruction-level strict  %v\n", rep.Strict.Instruction)
	fmt.Fprintf(w, "prompt-level loose        %v\n", rep.Loose.Prompt)
	fmt.Fprintf(w, "instruction-level loose   %v\n", rep.Loose.Instruction)
	fmt.Fprintf(w, "\n%-22s %-22s %s\n", "category", "strict", "loose")
	for _, k := range ifeval.SortedKeys(rep.Strict.ByCategory) {
		fmt.Fprintf(w, "%-22s %-22v %v\n", k, rep.Strict.ByCategory[k], rep.Loose.ByCategory[k])
	}
}
