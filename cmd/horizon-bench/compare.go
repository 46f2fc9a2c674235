package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/horizon-runmap/horizon/campaigns/compare"
)

const compareExample = "horizon-bench compare editions/full-residency-v1 editions/residency-ablation -o csv"

func compareCommand() *cli.Command {
	// -o and --output share one destination, as in simulate: the trailing
	// flags are set by the name they were given.
	output := new(string)
	return &cli.Command{
		Name:      "compare",
		Usage:     "compare two or more editions configuration by configuration: speed, TTFT, VRAM, tokens, build",
		UsageText: "horizon-bench compare EDITION_A EDITION_B [EDITION_C...] [-o md|csv|json] [--any-contract]",
		Description: `The first edition is the baseline A; every other edition is compared with it
as B. Configurations are matched by id; those not in every edition are
listed as such.

For each matched configuration and each pair (A, B), from the configuration
documents (configs/<id>.json) and their raw records:
  - pooled decode tok/s, TTFT mean (the config documents carry the mean,
    not a median) and the whole-worker VRAM peak (device-wide, NVML): A's,
    B's, the ratio B/A and each edition's block spread, min..max over the
    blocks (decode: block_spread_decode_tok_s; TTFT: each block's mean; VRAM:
    each worker's peak). An UNKNOWN or UNSUPPORTED observation stays so, in
    the ratio too; it is never 0.
  - tokens: whether the generated token ids are identical, request by
    request (same block, same prompt), with the numbers of requests
    compared and differing.
  - a verdict on pooled decode: "faster", "slower" or "within noise", by
    this rule: faster (slower) only when B's block range [min, max] lies
    wholly above (below) A's; ranges that overlap or touch are within
    noise. With one block a range is a single point, so any difference
    decides: compare editions of three blocks or more.

Above the table, one line per difference between A and each B: the build
and environment of the raw records (contract, device, GPU, driver, Go
version, VCS revision, VCS modified), and per matched configuration its
setup (checkpoint, artifact, executor, capacity, placement, policy,
transport, step mode, prefetch, overlap).

Editions measured under different contracts (the raw records' contract id
and SHA-256) are refused unless --any-contract. compare trusts the
documents it reads: horizon-verify checks them.

-o md (default) writes the editions, the differences, the unmatched
configurations, the rule and a Markdown table; csv one header row and one
row per (configuration, edition pair), nothing else; json one object with
"rule", "editions", "differences", "unmatched" and "rows". The row fields
are the same in every format: md and csv round them, json keeps full
precision in the same unit.

Example:

  ` + compareExample + `

Exit codes: 2 for a usage error (fewer than two editions, a missing or
non-edition directory, a bad -o, different contracts without
--any-contract); 1 for an edition that cannot be read.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "md", Destination: output, Usage: "output `FORMAT`: md, csv or json"},
			&cli.BoolFlag{Name: "any-contract", Usage: "compare editions measured under different contracts"},
		},
		Action: func(c *cli.Context) error { return runCompare(c, output) },
	}
}

// compareArgs returns the edition directories and parses the flags given
// among or after them (urfave/cli stops at the first positional argument;
// see trailingFlags, which takes one positional argument only).
func compareArgs(c *cli.Context) ([]string, error) {
	fs := commandFlagSet(c)
	var dirs []string
	rest := c.Args().Slice()
	for len(rest) > 0 {
		if err := fs.Parse(rest); err != nil {
			return nil, usageError("compare: %v (see horizon-bench compare --help)", err)
		}
		if fs.NArg() == 0 {
			break
		}
		dirs = append(dirs, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	var err error
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "help" || f.Name == "h" {
			err = flag.ErrHelp // cli's help flag, given after an edition
		}
		if err == nil {
			if e := c.Set(f.Name, f.Value.String()); e != nil {
				err = usageError("compare: invalid value %q for --%s (%v); see horizon-bench compare --help", f.Value.String(), f.Name, e)
			}
		}
	})
	return dirs, err
}

func runCompare(c *cli.Context, output *string) error {
	dirs, err := compareArgs(c)
	if errors.Is(err, flag.ErrHelp) {
		// --help after an edition prints the help, as before one.
		return cli.ShowCommandHelp(c.Lineage()[1], c.Command.Name)
	}
	if err != nil {
		return err
	}
	for _, d := range dirs {
		if err := residencyEdition("compare", d); err != nil {
			return err
		}
	}
	if len(dirs) < 2 {
		return usageError("compare: want two or more edition directories, got %d; e.g. %s", len(dirs), compareExample)
	}
	report, ok := compare.ReporterFor(*output)
	if !ok {
		return usageError("compare: -o %q: want %s", *output, strings.Join(compare.Formats, ", "))
	}
	var eds []*compare.Edition
	for _, d := range dirs {
		e, err := compare.Load(d)
		if errors.Is(err, compare.ErrNotEdition) {
			return usageError("compare: %v", err)
		}
		if err != nil {
			return fmt.Errorf("compare: %w", err)
		}
		eds = append(eds, e)
	}
	res, err := compare.Compare(eds, compare.Options{AnyContract: c.Bool("any-contract")})
	if errors.Is(err, compare.ErrContract) {
		return usageError("compare: %v", err)
	}
	if err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	return report(c.App.Writer, res)
}
