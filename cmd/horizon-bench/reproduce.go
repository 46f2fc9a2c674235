package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/horizon-runmap/horizon/campaigns"
	"github.com/horizon-runmap/horizon/campaigns/worker"
	"github.com/horizon-runmap/horizon/editions"
)

func reproduceCommand() *cli.Command {
	return &cli.Command{
		Name:  "reproduce",
		Usage: "rerun an edition's workers on this machine and record whether its tokens reproduce",
		UsageText: "horizon-bench reproduce <edition-dir> --out DIR [--configs ID,...] [--blocks K,...] [--force]\n" +
			"                  [--run-dir DIR] [--artifact-cache DIR] [--campaign-dir DIR] [--speed-tolerance F]",
		Description: `Reruns chosen workers of a published edition from the edition's own frozen
campaign.json and contract.json, on this machine: the artifacts are prepared
as the original run prepared them, and each (configuration, block) worker is
launched exactly as run launches it, prefilling as its original record did
where the configuration leaves prefill auto (a cuda record of raw version 2
ran auto token at a time; this build runs it batched). Then it compares every rerun worker with
the edition's worker of the same configuration and block, request by request:
prompt ids and prompt token ids, output token ids, and the cache counters
(hits, misses, evictions, h2d_bytes, h2d_copies, layer_misses, prefetch).
Tokens and counters must be identical. Speed is reported, not enforced: the
pooled decode rate of the rerun blocks against the edition's same blocks,
as a ratio, within or outside the declared --speed-tolerance (default 0.10,
i.e. a ratio in [0.90, 1.10]). Under a contract with declared prompt lengths
(PERF-PREFILL-v1, PERF-DEPTH-v1) it also compares, per prompt, the metrics
the edition's per-prompt claims cite, the same way: each length's mean and
median prefill rate, and each depth's pooled, mean and median decode rate
and time per output token; a metric not observed in both is UNKNOWN, not
compared.

It writes a reproduction directory, outside the edition:

   DIR/reproduction.json                  the record (schema horizon.reproduction)
   DIR/original/raw/<id>/block-<k>.json   byte copies of the edition's records
   DIR/rerun/raw/<id>/block-<k>.json      the rerun workers' records
   DIR/run/                               scratch: prepared artifacts (or --run-dir)

The record holds the SHA-256 of the edition's manifest.json, this machine's
environment, the tolerance and every comparison. horizon-verify checks it
against the edition and recomputes each comparison from the two sets of raw
records, then reports each claim as reproduced or not:

   horizon-bench reproduce editions/smoke-cpu --configs olmoe-tiny-c6 --blocks 1 --out out/repro-smoke &&
   horizon-verify editions/smoke-cpu --reproduction out/repro-smoke

--configs and --blocks choose the workers (default: every configuration,
every block). DIR is assembled beside its destination and renamed into place
when complete. An existing DIR is replaced only when it is empty, or a
previous reproduction directory and --force is given; anything else is
refused and left as it was. --campaign-dir resolves the campaign's relative
hf.dir checkpoint paths (default campaigns/, where the campaign files live).
A cuda edition needs the cuda-tagged build on a GPU machine.

Exit status: 0 every chosen worker's prompts, tokens and counters are
identical (whatever the speed ratio); 1 something differs (the first
differences are printed; the directory is still written, as the evidence),
or a worker failed; 2 usage: bad arguments, an unknown configuration, a
block out of range, a directory that is not an intact edition, or an --out
that may not be written.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Usage: "reproduction `DIR` (required; outside the edition)"},
			&cli.StringFlag{Name: "configs", Usage: "configuration `IDS` to rerun, comma-separated (default all)"},
			&cli.StringFlag{Name: "blocks", Usage: "`BLOCKS` to rerun of each, comma-separated, from 1 (default all)"},
			&cli.BoolFlag{Name: "force", Usage: "replace a previous reproduction directory (never anything else)"},
			&cli.StringFlag{Name: "run-dir", Usage: "run `DIR` for artifacts (default DIR/run)"},
			&cli.StringFlag{Name: "artifact-cache", Usage: "keep prepared artifacts in `DIR`/artifacts/, shared with runs"},
			&cli.StringFlag{Name: "campaign-dir", Usage: "`DIR` the campaign's relative hf.dir paths resolve against (default campaigns)"},
			&cli.Float64Flag{Name: "speed-tolerance", Value: editions.DefaultSpeedTolerance, Usage: "declared speed tolerance `F`: a ratio in [1-F, 1+F] is within"},
		},
		Action: runReproduce,
	}
}

// reproduceFlags are the reproduce command's flag values (flags after the
// edition are parsed here too, as run does).
type reproduceFlags struct {
	out, configs, blocks, runDir, artifactCache, campaignDir string
	force                                                    bool
	tolerance                                                float64
}

func parseReproduceArgs(c *cli.Context) (string, campaigns.ReproduceOptions, error) {
	var o campaigns.ReproduceOptions
	edition, err := trailingFlags(c, positional{"edition", "edition directory",
		"horizon-bench reproduce editions/smoke-cpu --configs olmoe-tiny-c6 --blocks 1 --out out/repro-smoke"})
	if err != nil {
		return "", o, err
	}
	f := reproduceFlags{out: c.String("out"), configs: c.String("configs"), blocks: c.String("blocks"), runDir: c.String("run-dir"),
		artifactCache: c.String("artifact-cache"), campaignDir: c.String("campaign-dir"), force: c.Bool("force"), tolerance: c.Float64("speed-tolerance")}
	if f.out == "" {
		return "", o, usageError("reproduce: --out DIR is required (a directory outside the edition)")
	}
	if !(f.tolerance > 0 && f.tolerance < 1) {
		return "", o, usageError("reproduce: --speed-tolerance %v is not in (0, 1)", f.tolerance)
	}
	o = campaigns.ReproduceOptions{Edition: edition, Out: f.out, RunDir: f.runDir, ArtifactCache: f.artifactCache,
		CampaignDir: f.campaignDir, Force: f.force, SpeedTolerance: f.tolerance}
	for _, id := range strings.Split(f.configs, ",") {
		if id = strings.TrimSpace(id); id != "" {
			o.Configs = append(o.Configs, id)
		}
	}
	for _, s := range strings.Split(f.blocks, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		b, err := strconv.Atoi(s)
		if err != nil {
			return "", o, usageError("reproduce: --blocks %q: %q is not a block number", f.blocks, s)
		}
		o.Blocks = append(o.Blocks, b)
	}
	return edition, o, nil
}

// buildCUDA is true in cuda-tagged builds (reproduce_cuda.go): without it,
// run refuses a cuda campaign and reproduce a cuda edition before any
// artifact is prepared, instead of failing at the first worker minutes (a
// 13 GiB synthetic checkpoint) later.
var buildCUDA bool

func runReproduce(c *cli.Context) error {
	edition, o, err := parseReproduceArgs(c)
	if err != nil {
		return err
	}
	if err := residencyEdition("reproduce", edition); err != nil {
		return err
	}
	o.CheckDevice = func(device string) error {
		if device == "cuda" && !buildCUDA {
			return errors.New("the edition ran on cuda and this horizon-bench was built without CUDA support; " +
				"build it with `make cuda` and reproduce on a machine with an NVIDIA GPU")
		}
		return nil
	}
	launch, _, err := selfLauncher()
	if err != nil {
		return err
	}
	o.Launch = launch
	o.Runtime = worker.Runtime{}
	o.Progress = stderrProgress()
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := campaigns.Reproduce(ctx, o)
	switch {
	case errors.Is(err, campaigns.ErrReproduceUsage), errors.Is(err, campaigns.ErrEditionExists):
		return cli.Exit("reproduce: "+err.Error(), exitUsage)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("reproduce: interrupted; nothing was written to %s", o.Out)
	case err != nil:
		return fmt.Errorf("reproduce: %w (nothing was written to %s)", err, o.Out)
	}
	w := c.App.Writer
	d := res.Doc
	fmt.Fprintf(w, "reproduction of %s (manifest sha256 %s) on %s (%s, %s) written to %s\n",
		d.Edition, d.EditionManifestSHA256, d.Environment.Hostname, d.Environment.Device, d.Environment.CPU, res.Dir)
	for _, cf := range d.Configurations {
		verdict := "tokens, prompts and counters IDENTICAL"
		if !cf.Identical {
			verdict = "DIFFERENT"
		}
		within := "within"
		if !cf.WithinTolerance {
			within = "outside"
		}
		if cf.OriginalPooledDecodeTokS == 0 && cf.RerunPooledDecodeTokS == 0 {
			fmt.Fprintf(w, "  %s blocks %v: %s; pooled decode UNKNOWN in both (no decode interval)\n", cf.ConfigID, cf.Blocks, verdict)
		} else {
			fmt.Fprintf(w, "  %s blocks %v: %s; pooled decode %.2f tok/s vs the edition's %.2f: ratio %.3f, %s ±%g (reported, not enforced)\n",
				cf.ConfigID, cf.Blocks, verdict, cf.RerunPooledDecodeTokS, cf.OriginalPooledDecodeTokS, cf.SpeedRatio, within, d.SpeedTolerance)
		}
		for _, g := range []struct {
			what    string
			prompts []editions.ReproPrompt
		}{{"prefill", cf.PrefillLengths}, {"decode at depth", cf.DecodeDepths}} {
			for _, q := range g.prompts {
				fmt.Fprintf(w, "    %s %s (%d tokens): %s\n", g.what, q.PromptID, q.PromptTokens, reproMetricsLine(q.Metrics, d.SpeedTolerance))
			}
		}
	}
	fmt.Fprintf(w, "verify it: horizon-verify %s --reproduction %s\n", edition, res.Dir)
	if !d.Identical {
		return cli.Exit("reproduce: the edition was NOT reproduced:\n  "+strings.Join(campaigns.Differences(d, 10), "\n  "), 1)
	}
	return nil
}

// reproMetricsLine is one prompt's comparisons, rerun vs the edition:
// "mean_tok_s 331.2 vs 382.5 (ratio 0.866, outside); ...".
func reproMetricsLine(ms []editions.ReproMetric, tol float64) string {
	var parts []string
	for _, m := range ms {
		if !m.Ratio.Ok() {
			parts = append(parts, fmt.Sprintf("%s %s vs %s (not compared)", m.Metric, floatObsText(m.Rerun), floatObsText(m.Original)))
			continue
		}
		within := "within"
		if !m.WithinTolerance {
			within = "outside"
		}
		parts = append(parts, fmt.Sprintf("%s %s vs %s (ratio %.3f, %s)", m.Metric, floatObsText(m.Rerun), floatObsText(m.Original), m.Ratio.Value, within))
	}
	return strings.Join(parts, "; ") + fmt.Sprintf(" (rerun vs the edition, ±%g, reported, not enforced)", tol)
}

// floatObsText is an observation for people: %.4g, or its status (UNKNOWN).
func floatObsText(o editions.Obs[float64]) string {
	if !o.Ok() {
		return o.Status
	}
	return strconv.FormatFloat(o.Value, 'g', 4, 64)
}
