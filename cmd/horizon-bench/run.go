package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/horizon-runmap/horizon/campaigns"
	"github.com/horizon-runmap/horizon/campaigns/worker"
	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
)

func runCommand() *cli.Command {
	return &cli.Command{
		Name:  "run",
		Usage: "run a benchmark campaign and publish its edition",
		UsageText: "horizon-bench run <campaign.yaml> [--out DIR] [--run-dir DIR] [--force] [--contract FILE]\n" +
			"                  [--stop-after DURATION] [--artifact-cache DIR]",
		Description: `Runs every configuration of the campaign under its contract (PERF-REAL-v1 for
the residency campaigns, PERF-PREFILL-v1 and PERF-PREFILL-SMOKE-v1 for the
prefill ones: one prompt per declared length, one output token, the prompt
tok/s per length in configs/<id>.json metrics.prefill_lengths; PERF-DEPTH-v1
and PERF-DEPTH-SMOKE-v1 for the depth ones: decode after one prompt per
context depth, per depth in metrics.decode_depths, a where-held depth run
only where the model's context holds it): one worker
process per (configuration, block), one
at a time, each loading the prepared artifact, running the excluded warmup and
the block's prompts on an evolving expert cache, and writing a raw record.
Then it aggregates the records and publishes the edition:

   editions/<edition>/   manifest.json, campaign.json, contract.json,
                         configs/<id>.json, raw/<id>/block-<k>.json,
                         claims.json, report.md, report.html, plots/

The campaign is validated first; an invalid one writes nothing. Artifacts
are prepared once per checkpoint and expert format into the run directory
(default runs/<edition>/) and reused while they verify. Finished workers
are journaled there with their SHA-256, so a run that crashed or was
interrupted resumes where it stopped when started again (with the same
executable: records of another build are redone). The edition is
assembled next to its destination and renamed into place only when
complete; an existing edition is replaced (atomically) only with --force.
--out never replaces anything that is not an edition: a file, a symlink, an
empty directory or a directory without a horizon manifest.json is refused
(exit 2) with or without --force, and left as it was.

An IFEval campaign (contract IFEVAL-v1 or IFEVAL-SMOKE-v1, e.g.
campaigns/ifeval-smoke.yaml) runs the same way with a shard of the contract's
prompts as each worker's unit: every prompt is rendered through the
checkpoint's chat template (the raw prompt without one, recorded), generated
greedily until EOS or max_new_tokens, and kept; the edition holds
raw/<id>/shard-<k>.json, the scores and verdicts per configuration, claims,
reports and the manifest, and horizon-verify re-scores every response:

   horizon-bench run campaigns/ifeval-smoke.yaml && horizon-verify editions/ifeval-smoke-cpu

A fidelity campaign (contract FIDELITY-v1 or FIDELITY-SMOKE-v1, e.g.
campaigns/fidelity-smoke.yaml) pairs its configurations by arm: for each
checkpoint one expert_format fp16 (reference) and one int4 (treatment),
equal in everything else. One worker per (pair, shard) runs both arms on the
shard's prompts, then feeds the reference's tokens to the treatment arm and
keeps each position's KL, top-1 agreement, max |logit difference| and top-k
of both arms; the edition holds raw/<pair>/shard-<k>.json, paired/<pair>.json
(paired IFEval verdicts, McNemar p, divergence summaries with bootstrap
intervals), claims, reports and the manifest, and horizon-verify recomputes
it all:

   horizon-bench run campaigns/fidelity-smoke.yaml && horizon-verify editions/fidelity-smoke-cpu

--contract runs the campaign against a contract file instead of the built-in
contract it names (the campaign must still declare that contract's hash;
residency contracts only).

--stop-after DURATION (e.g. 8m, 450s) bounds a run to a time slot: once
DURATION of wall time has passed since the command started, the runner
starts no new worker and no new artifact preparation. The worker in flight
finishes and is journaled; then the command prints how many workers remain
and exits with status 75 (EX_TEMPFAIL). Run the same command again to
resume; loop while the status is 75. It is a deadline for starting work, not
a hard limit: leave room for one worker (or one artifact preparation) after
it. With nothing left to run the edition is published as usual (status 0).

--artifact-cache DIR keeps prepared artifacts in DIR/artifacts/ instead of
<run-dir>/artifacts/, so that campaigns with different run directories
(run one after the other or at the same time) prepare each checkpoint once
and share it. Runs take turns preparing through a lock on
DIR/artifacts.lock. Keep DIR outside every run directory. Without it each
run directory holds its own artifacts, and runs of different campaigns with
different --run-dir never touch each other's files.

Exit status: 0 edition published; 75 stopped by --stop-after with work left
(resumable); 2 invalid campaign, bad arguments, the edition exists
without --force, or --out names something that is not an edition; 1 any other failure (a failed or interrupted worker: the
finished workers are kept, running again resumes).`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Usage: "edition `DIR` (default editions/<edition>)"},
			&cli.StringFlag{Name: "run-dir", Usage: "run `DIR` for artifacts and finished workers (default runs/<edition>)"},
			&cli.BoolFlag{Name: "force", Usage: "replace an existing edition"},
			&cli.StringFlag{Name: "contract", Usage: "contract `FILE` instead of the built-in one"},
			&cli.DurationFlag{Name: "stop-after", DefaultText: "none", Usage: "start no new worker after `DURATION` (e.g. 8m); exit 75 with work left, run again to resume"},
			&cli.StringFlag{Name: "artifact-cache", Usage: "keep prepared artifacts in `DIR`/artifacts/, shared between run directories (default <run-dir>/artifacts/)"},
		},
		Action: runRun,
	}
}

// runFlags are the run command's flag values (flags after the campaign
// file, `run campaigns/smoke.yaml --out DIR`, are parsed by trailingFlags).
type runFlags struct {
	out, runDir, contract, artifactCache string
	force                                bool
	stopAfter                            time.Duration
	stopAfterSet                         bool // --stop-after given (0 is a valid deadline: start nothing)
}

// exitStopped is run's exit status when --stop-after stopped it with work
// left: EX_TEMPFAIL, "try again".
const exitStopped = 75

func parseRunArgs(c *cli.Context) (string, runFlags, error) {
	campaign, err := trailingFlags(c, positional{"campaign", "campaign file", "horizon-bench run campaigns/smoke.yaml"})
	if err != nil {
		return "", runFlags{}, err
	}
	if st, err := os.Stat(campaign); err != nil || st.IsDir() {
		return "", runFlags{}, usageError("run: %s is not a campaign file (e.g. horizon-bench run campaigns/smoke.yaml)", campaign)
	}
	f := runFlags{out: c.String("out"), runDir: c.String("run-dir"), contract: c.String("contract"), force: c.Bool("force"),
		artifactCache: c.String("artifact-cache"), stopAfter: c.Duration("stop-after"), stopAfterSet: c.IsSet("stop-after")}
	if f.stopAfterSet && f.stopAfter < 0 {
		return "", f, usageError("run: --stop-after %v is negative", f.stopAfter)
	}
	return campaign, f, nil
}

func runRun(c *cli.Context) error {
	start := time.Now()
	campaign, f, err := parseRunArgs(c)
	if err != nil {
		return err
	}
	launch, exe, err := selfLauncher()
	if err != nil {
		return err
	}
	// The workers run this executable: its hash keys their journal entries,
	// so resuming with a rebuilt binary redoes the old binary's workers.
	build, _, err := editions.HashFile(exe)
	if err != nil {
		return fmt.Errorf("hash this executable: %w", err)
	}
	prog := stderrProgress()
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	var shouldStop func() bool
	if f.stopAfterSet {
		shouldStop = func() bool { return time.Since(start) >= f.stopAfter }
	}
	ro := campaigns.RunOptions{
		Campaign: campaign, Contract: f.contract, Out: f.out,
		RunDir: f.runDir, Force: f.force, Launch: launch, Runtime: worker.Runtime{}, Progress: prog,
		ArtifactCache: f.artifactCache, ShouldStop: shouldStop, Build: build,
	}
	// The contract's kind picks the runner: an IFEval contract's workers
	// generate shards of prompts, a fidelity contract's generate shards with
	// both arms of a pair, a residency contract's measure blocks.
	kid, err := campaigns.ContractIDOf(campaign)
	if err != nil {
		return cli.Exit(err.Error(), exitUsage)
	}
	run := campaigns.Run
	switch {
	case contracts.IsIFEval(kid):
		run = campaigns.RunIFEval
	case contracts.IsFidelity(kid):
		run = campaigns.RunFidelity
	}
	res, err := run(ctx, ro)
	var stopped *campaigns.StoppedError
	switch {
	case errors.As(err, &stopped):
		msg := fmt.Sprintf("stopped by --stop-after %v after %s: %d workers run now, %d of %d workers remain",
			f.stopAfter, time.Since(start).Round(time.Second), res.Ran, stopped.Remaining, stopped.Workers)
		if stopped.Artifacts > 0 {
			msg += fmt.Sprintf(", %d artifact(s) still to prepare", stopped.Artifacts)
		}
		return cli.Exit(fmt.Sprintf("%s (run directory %s); run the same command again to resume (exit %d)",
			msg, stopped.RunDir, exitStopped), exitStopped)
	case errors.Is(err, campaigns.ErrInvalid), errors.Is(err, campaigns.ErrEditionExists), errors.Is(err, campaigns.ErrNotEdition):
		return cli.Exit(err.Error(), exitUsage)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("interrupted; finished workers are kept, run the same command again to resume")
	case err != nil:
		return err
	}
	fmt.Fprintf(c.App.Writer, "edition %s written to %s: %d workers (%d run now, %d finished before) in %s\n",
		res.Edition, res.Dir, res.Workers, res.Ran, res.Workers-res.Ran, res.Elapsed.Round(100*time.Millisecond))
	return nil
}
