// Command horizon-verify checks a Horizon edition independently of the
// program that wrote it: hashes, schemas, contract conformance, every
// aggregate recomputed from the raw records, claims, cache invariants and
// token-stream consistency (package verifier). main stays thin: exit codes
// live in exitcode.go, the two output formats in output_text.go and
// output_json.go, schema loading in schemas.go.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/horizon-runmap/horizon/editions"
	"github.com/horizon-runmap/horizon/verifier"
)

func newApp(stdout, stderr io.Writer) *cli.App {
	return &cli.App{
		Name:  "horizon-verify",
		Usage: "verify a Horizon benchmark edition from its raw records",
		UsageText: "horizon-verify <edition-dir> [--json] [--schemas DIR] [--contract FILE] [--campaign FILE]\n" +
			"                 [--trusted-key FILE] [--reproduction DIR]   (or: horizon-verify --list-ids)",
		Description: checksHelp() + `
Examples:

   horizon-verify editions/smoke-cpu
   horizon-verify editions/smoke-cpu --campaign campaigns/smoke.yaml --json
   horizon-verify editions/smoke-cpu --trusted-key ~/.horizon/horizon.pub
   horizon-verify editions/smoke-cpu --reproduction out/repro-smoke

Each finding is an error (the edition is wrong) or a hint (something could not be
verified), with a stable ID, the file, a JSON pointer, the expected and found values.
--list-ids prints every ID. With --json the output is a stream of JSON objects, one
per line: {"message_type":"finding",...} for each finding, then one
{"message_type":"summary",...}.

What no check of one edition can catch: a forger who fakes a whole run
consistently. A uniformly faster fake (every timestamp, wall clock and VRAM
sample rescaled together), cache counters changed alike in every block of a
configuration that shares its cache settings with no other, or a Hugging Face
checkpoint's prompt and EOS ids changed in every worker all leave the records
self-consistent. Only a reproduction on hardware you trust (--reproduction) or a
signature by a key you trust (--trusted-key) speaks to those.

Schemas are the ones embedded in this binary (package schemas) unless --schemas
names a directory of *.json schema files.

` + exitCodeHelp(),
		HideHelpCommand: true,
		Writer:          stdout,
		ErrWriter:       stderr,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print findings and the summary as a JSON stream (one object per line)"},
			&cli.StringFlag{Name: "schemas", Usage: "validate against the *.json schemas in `DIR` instead of the embedded ones"},
			&cli.BoolFlag{Name: "list-ids", Usage: "list every finding ID with its check, severity and meaning, and exit"},
			&cli.StringFlag{Name: "contract", Usage: "accept an edition citing the contract in `FILE` (YAML) instead of a released one"},
			&cli.StringFlag{Name: "campaign", Usage: "require the frozen campaign to be the campaign in `FILE` (e.g. campaigns/smoke.yaml)"},
			&cli.StringFlag{Name: "trusted-key", Usage: "require attestation.dsse.json signed by the ed25519 public key in `FILE` (horizon-bench keygen)"},
			&cli.StringFlag{Name: "reproduction", Usage: "check the reproduction record in `DIR` (horizon-bench reproduce) against this edition"},
			&cli.BoolFlag{Name: "version", Usage: "print the version (module, VCS revision and time, Go version) and exit"},
		},
		HideVersion: true,
		Action: func(c *cli.Context) error {
			return run(c, stdout)
		},
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			return usageError("%v", err)
		},
		ExitErrHandler: func(*cli.Context, error) {}, // main decides the exit code
	}
}

// checkHelp describes each check verifier.Verify runs, by name, one string
// per help line. checksHelp lists them in verifier.RunOrder, so the help's
// list and its count are the checks that run (a test holds every check to
// a description here, and every description to a check).
var checkHelp = map[string][]string{
	"manifest": {
		"every listed file present with its size and SHA-256, nothing unlisted;",
		"republications (horizon-bench republish) are hints",
	},
	"schema": {"every JSON document validates against its JSON Schema"},
	"contract": {
		"the frozen contract's hash; declared blocks and prompts in order;",
		"exactly N tokens, no EOS, consistent timestamps; warmup excluded;",
		"prefill_seconds within (0, TTFT]; declared prompt lengths (prompt_rule) run as declared",
	},
	"recompute": {
		"every aggregate of configs/*.json rederived from raw/ and compared exactly,",
		"the prefill rate per prompt length (mean, median, bootstrap-v1 interval) among them",
	},
	"claims": {
		"each claim equals its source value rounded as declared; ratios and",
		"interval bounds resolve to their sources; valid statuses",
	},
	"invariants": {"required-zero cache counters are observed zeros (UNKNOWN is an error)"},
	"consistency": {
		"same checkpoint, expert format, KV cache element type, expert and dense",
		"activation dtypes, device and numerics => identical greedy tokens",
	},
	"binding": {
		"each claim cites its own configuration's metric (and its interval, the",
		"configuration's bootstrap bounds) with the statement the verifier",
		"regenerates; every required metric is claimed; evidence and",
		"publication no higher than the campaign's; the contract is a released",
		"one (or --contract FILE), the campaign is --campaign FILE if given",
	},
	"physics": {
		"cache counters obey the cache's arithmetic and agree across blocks and",
		"configurations with the same cache settings; wall clocks bound the work;",
		"timestamps strictly increase; no two requests share timings; one build,",
		"host and GPU; the declared KV cache element type and expert and dense",
		"activation dtypes (FP16 only with a batched prefill, expert FP16 only",
		"with INT4 experts); VRAM holds the placed experts; EOS, tokenizer and",
		"prompt ids pinned by the checkpoint",
	},
	"replay": {
		"each worker's routing traces (raw record version 2) replayed through the",
		"declared placement, policy and capacity reproduce every request's cache",
		"counters exactly; traces agree with the token counts; records from before",
		"traces are a hint",
	},
	"derived": {
		"report.md and report.html tables and report.html's headline sentences",
		"equal the JSON; a cuda report's ceilings section (and a headline's HBM",
		"ceiling) equal to the ones recomputed from the raw records; plots present",
	},
	"ifeval": {
		"IFEval editions only (they run manifest, schema, ifeval, signature; the",
		"others are n/a): every retained response re-scored on the CPU; verdicts,",
		"scores and claims recomputed, the reports' result rows checked against",
		"them; the contract is the released one, its input hash and population the",
		"official ones; endings agree with the EOS ids; one build; each shard's",
		"wall clock bounds its responses' seconds; a synthetic checkpoint's texts",
		"decode from their token ids",
	},
	"fidelity": {
		"fidelity editions only (they run manifest, schema, fidelity, signature):",
		"both arms' responses re-scored on the CPU; paired verdicts, counts,",
		"McNemar p, per-prompt and pooled divergence summaries (bootstrap",
		"intervals) and claims recomputed from the shards, the reports checked",
		"against them; arms paired as the campaign declares (fp16 reference, int4",
		"treatment); forced positions fed the reference's tokens; per-position KL",
		"and max |logit diff| checked against the stored top-k only (a hint says so)",
	},
	"signature": {
		"attestation.dsse.json (horizon-bench attest) signs this manifest.json;",
		"with --trusted-key it must be that key's signature (unsigned: a hint)",
	},
	"reproduction": {
		"with --reproduction DIR (horizon-bench reproduce): the record belongs to",
		"this edition, its comparisons recompute from both sets of raw records,",
		"and each claim is reported reproduced or not",
	},
}

// checksHelp is the help's list of checks: how many, then one entry per
// check in the order they run, its name in a column of its own.
func checksHelp() string {
	checks := verifier.RunOrder()
	var b strings.Builder
	fmt.Fprintf(&b, "Reads editions/<name>/ and runs these %d checks, in this order:\n\n", len(checks))
	for _, name := range checks {
		lines := checkHelp[name]
		if len(lines) == 0 {
			lines = []string{"(undescribed: horizon-verify's help lacks this check)"}
		}
		for i, l := range lines {
			if i > 0 {
				name = ""
			}
			fmt.Fprintf(&b, "   %-14s%s\n", name, l)
		}
	}
	return b.String()
}

func run(c *cli.Context, stdout io.Writer) error {
	if c.Bool("version") {
		fmt.Fprint(stdout, editions.ReadBuildInfo().VersionText("horizon-verify", false))
		return nil
	}
	if c.Bool("list-ids") {
		if c.NArg() != 0 {
			return usageError("--list-ids takes no edition directory")
		}
		listIDs(stdout)
		return nil
	}
	if c.NArg() != 1 {
		return usageError("want exactly one edition directory, got %d arguments (see --help)", c.NArg())
	}
	if err := checkOptionPaths(c); err != nil {
		return err
	}
	schemas, err := loadSchemas(c.String("schemas"))
	if err != nil {
		return usageError("%v", err)
	}
	rep, verr := verifier.Verify(c.Args().First(), verifier.Options{Schemas: schemas,
		ContractFile: c.String("contract"), CampaignFile: c.String("campaign"),
		TrustedKey: c.String("trusted-key"), Reproduction: c.String("reproduction")})
	if c.Bool("json") {
		err = writeJSON(stdout, rep, exitCode(rep, verr))
	} else {
		err = writeText(stdout, rep, exitCode(rep, verr))
	}
	if err != nil {
		return err
	}
	if code := exitCode(rep, verr); code != exitPass {
		return cli.Exit("", code)
	}
	return nil
}

func main() {
	os.Exit(runMain(os.Args, os.Stdout, os.Stderr))
}

// runMain runs the command and returns its exit code.
func runMain(args []string, stdout, stderr io.Writer) int {
	err := newApp(stdout, stderr).Run(interspersed(args))
	if err == nil {
		return exitPass
	}
	code := exitCodeOf(err)
	if msg := err.Error(); msg != "" {
		fmt.Fprintf(stderr, "horizon-verify: %s\n", msg)
	}
	return code
}

// checkOptionPaths makes a flag that names a missing file or directory a
// usage error (exit 2, one line) before anything is verified: a typo in
// --trusted-key must not read as "the edition is wrong". What the files
// hold is judged by the checks, as findings.
func checkOptionPaths(c *cli.Context) error {
	for _, f := range []struct {
		flag string
		dir  bool
	}{{"contract", false}, {"campaign", false}, {"trusted-key", false}, {"reproduction", true}} {
		p := c.String(f.flag)
		if p == "" {
			continue
		}
		st, err := os.Stat(p)
		switch {
		case err != nil:
			return usageError("--%s %s: %v", f.flag, p, errors.Unwrap(err))
		case f.dir && !st.IsDir():
			return usageError("--%s %s is not a directory (horizon-bench reproduce writes one)", f.flag, p)
		case !f.dir && !st.Mode().IsRegular():
			return usageError("--%s %s is not a regular file", f.flag, p)
		}
	}
	return nil
}
