package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/horizon-runmap/horizon/campaigns"
	"github.com/horizon-runmap/horizon/campaigns/slurm"
	"github.com/horizon-runmap/horizon/campaigns/worker"
	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
)

func runCommand() *cli.Command {
	return &cli.Command{
		Name:  "run",
		Usage: "run a benchmark campaign and publish its edition",
		UsageText: "horizon-bench run <campaign.yaml> [--out DIR] [--run-dir DIR] [--force] [--contract FILE]\n" +
			"                  [--stop-after DURATION] [--artifact-cache DIR] [--checkpoint-scratch DIR] [--prepare-only]\n" +
			"                  [--scheduler local|slurm] [--slurm-args \"ARGS\"] [--slurm-time LIMIT] [--slurm-poll DURATION]",
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

--checkpoint-scratch DIR synthesises synthetic checkpoints in DIR instead of
beside each artifact, and keeps the last one there: the next artifact of the
same checkpoint (a campaign's FP16 and INT4 artifacts of one model) reuses it
instead of synthesising it again. DIR holds one checkpoint at a time (~29 GB
for the Qwen1.5-MoE shape); remove DIR when the run is done. For a machine
whose disk cannot hold the artifacts and the checkpoint together, e.g.
--artifact-cache /dev/shm/horizon-artifacts --checkpoint-scratch /tmp/horizon-scratch.

--prepare-only prepares (or verifies) the campaign's artifacts and stops:
no worker runs, no edition is written, and --out is neither checked nor
touched. It prints the artifact directories and exits 0 (75 when
--stop-after stopped it first). With --artifact-cache it readies a shared
cache while something else has the GPU (GPU tests, another program); the
real run, given the same --artifact-cache and its own --run-dir, then
verifies and reuses the artifacts, waiting on the cache's lock if the
preparation is still going:

   horizon-bench run campaigns/ttft.yaml --prepare-only \
       --run-dir runs/prepare/ttft-v1 --artifact-cache runs/artifact-cache &

--scheduler slurm runs the workers as one Slurm job array on a cluster instead
of one after another here (--scheduler local, the default). The command
validates the campaign, freezes it and prepares the artifacts into the run
directory as a local run does, then submits one array task per unfinished
worker with sbatch: each runs this executable's worker subcommand, writes its
raw record into the run directory and journals it there itself. The command
then polls squeue (and sacct, where the cluster keeps accounting), prints a
line per finished task with the host it ran on, and once every task is over
aggregates and publishes the edition atomically, exactly as a local run.
On a login node, with the run directory on the cluster's shared filesystem:

   horizon-bench run campaigns/residency39.yaml --scheduler slurm \
       --run-dir /shared/runs/residency39 --slurm-args "--partition=gpu --account=lab"

Requirements: the run directory and this executable must be at the same path
on every node (a shared filesystem with working flock: NFS, Lustre, GPFS); a
task whose executable's SHA-256 is not the submitter's refuses to run. Each
task asks for one task, a time limit (--slurm-time, default 2:00:00) and its
device: one GPU (--gres=gpu:1) for a cuda campaign, never two workers on one
GPU; the whole node (--exclusive) for a cpu campaign. The job is named
horizon-<edition>; task logs go to <run-dir>/slurm/logs/<job>_<task>.log and
the submitted arrays are recorded in <run-dir>/slurm/arrays.json.
--slurm-args are extra sbatch arguments, split on spaces (no quoting), given
after the script's directives, which they override (e.g. --time=6:00:00).

Killing the command (Ctrl-C) leaves the array running. Running the same
command again adopts it: finished records are kept, tasks still pending or
running are waited for (never submitted twice), and only missing or failed
workers are submitted again, as a new array. A failed task is named with its
log; the command then exits 1, and running it again resubmits it. Each
record keeps the host, CPU, GPU and driver its worker ran on; the campaign's
hosts: uniform (default: every worker on one GPU model and driver; ask for
one GPU model, e.g. --slurm-args "--gres=gpu:h100:1") or hosts: mixed (each
configuration's workers on one host: one task runs a configuration's blocks
in turn, and a configuration resubmitted after some of its blocks finished
is pinned to their host) is what horizon-verify holds the edition to.
--stop-after does not apply (exit 2). IFEval campaigns run locally only. A
local run refuses (exit 2) a run directory job arrays were submitted from.

Exit status: 0 edition published (with --prepare-only: artifacts ready); 75 stopped by --stop-after with work left
(resumable); 2 invalid campaign, bad arguments, a cuda campaign in a build
without CUDA support, the edition exists without --force, --out names something that is not an edition, or a local run
in a run directory job arrays were submitted from; 1 any other failure (a failed or interrupted worker: the
finished workers are kept, running again resumes).`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Usage: "edition `DIR` (default editions/<edition>)"},
			&cli.StringFlag{Name: "run-dir", Usage: "run `DIR` for artifacts and finished workers (default runs/<edition>)"},
			&cli.BoolFlag{Name: "force", Usage: "replace an existing edition"},
			&cli.StringFlag{Name: "contract", Usage: "contract `FILE` instead of the built-in one"},
			&cli.DurationFlag{Name: "stop-after", DefaultText: "none", Usage: "start no new worker after `DURATION` (e.g. 8m); exit 75 with work left, run again to resume"},
			&cli.StringFlag{Name: "artifact-cache", Usage: "keep prepared artifacts in `DIR`/artifacts/, shared between run directories (default <run-dir>/artifacts/)"},
			&cli.StringFlag{Name: "checkpoint-scratch", Usage: "synthesise synthetic checkpoints in `DIR`, keeping the last for the next artifact of it (default: beside each artifact, removed after)"},
			&cli.BoolFlag{Name: "prepare-only", Usage: "prepare (or verify) the artifacts, then stop: no worker, no edition (exit 0)"},
			&cli.StringFlag{Name: "scheduler", Value: schedulerLocal, Usage: "where the workers run: local (one after another here) or slurm (one job array on the cluster; see above)"},
			&cli.StringFlag{Name: "slurm-args", Usage: "extra sbatch `ARGS`, split on spaces (e.g. \"--partition=gpu --account=lab\"); --scheduler slurm only"},
			&cli.StringFlag{Name: "slurm-time", Value: slurm.DefaultTime, Usage: "each task's time `LIMIT` (sbatch --time); --scheduler slurm only"},
			&cli.DurationFlag{Name: "slurm-poll", Value: 10 * time.Second, Usage: "how often to ask squeue about the tasks (`DURATION`); --scheduler slurm only"},
		},
		Action: runRun,
	}
}

// runFlags are the run command's flag values (flags after the campaign
// file, `run campaigns/smoke.yaml --out DIR`, are parsed by trailingFlags).
type runFlags struct {
	out, runDir, contract, artifactCache string
	checkpointScratch                    string
	force, prepareOnly                   bool
	stopAfter                            time.Duration
	stopAfterSet                         bool // --stop-after given (0 is a valid deadline: start nothing)
	scheduler                            string
	slurm                                *slurm.Cluster // --scheduler slurm
	slurmPoll                            time.Duration
}

// Schedulers of the run command's --scheduler.
const (
	schedulerLocal = "local"
	schedulerSlurm = "slurm"
)

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
		artifactCache: c.String("artifact-cache"), stopAfter: c.Duration("stop-after"), stopAfterSet: c.IsSet("stop-after"),
		checkpointScratch: c.String("checkpoint-scratch"), prepareOnly: c.Bool("prepare-only")}
	if f.stopAfterSet && f.stopAfter < 0 {
		return "", f, usageError("run: --stop-after %v is negative", f.stopAfter)
	}
	f.scheduler = c.String("scheduler")
	switch f.scheduler {
	case schedulerLocal:
		for _, name := range []string{"slurm-args", "slurm-time", "slurm-poll"} {
			if c.IsSet(name) {
				return "", f, usageError("run: --%s applies to --scheduler slurm only", name)
			}
		}
	case schedulerSlurm:
		if f.stopAfterSet {
			return "", f, usageError("run: --stop-after does not apply to --scheduler slurm (the tasks run on the cluster; Ctrl-C leaves them running, run again to adopt them)")
		}
		args := c.String("slurm-args")
		if strings.ContainsAny(args, "'\"\\") {
			return "", f, usageError("run: --slurm-args %q: arguments are split on spaces, without quoting; write --partition=gpu, not quotes", args)
		}
		if t := c.String("slurm-time"); t == "" || strings.ContainsAny(t, " \t\n") {
			return "", f, usageError("run: --slurm-time %q: want a Slurm time limit such as 30:00 or 2:00:00", t)
		}
		if c.Duration("slurm-poll") <= 0 {
			return "", f, usageError("run: --slurm-poll %v: want a positive duration such as 10s", c.Duration("slurm-poll"))
		}
		f.slurm = &slurm.Cluster{Args: strings.Fields(args), Time: c.String("slurm-time")}
		f.slurmPoll = c.Duration("slurm-poll")
	default:
		return "", f, usageError("run: --scheduler %q: want local or slurm", f.scheduler)
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
		RunDir: f.runDir, Force: f.force, Launch: launch, Runtime: worker.Runtime{CheckpointScratch: f.checkpointScratch}, Progress: prog,
		ArtifactCache: f.artifactCache, ShouldStop: shouldStop, Build: build, PrepareOnly: f.prepareOnly,
	}
	// The contract's kind picks the runner: an IFEval contract's workers
	// generate shards of prompts, a fidelity contract's generate shards with
	// both arms of a pair, a residency contract's measure blocks.
	kid, err := campaigns.ContractIDOf(campaign)
	if err != nil {
		return cli.Exit(err.Error(), exitUsage)
	}
	if cf, err := campaigns.LoadFile(campaign); err == nil && cf.Device == "cuda" && !buildCUDA {
		return usageError("run: %s runs on cuda, and this horizon-bench was built without CUDA support: build it with `make cuda` and run it on a machine with an NVIDIA GPU", campaign)
	}
	run := campaigns.Run
	switch {
	case contracts.IsIFEval(kid):
		run = campaigns.RunIFEval
	case contracts.IsFidelity(kid):
		run = campaigns.RunFidelity
	}
	if f.slurm != nil {
		if strings.Contains(exe, "/go-build") {
			return usageError("run: --scheduler slurm: this executable (%s) is a temporary build of go run, gone when it exits; the tasks run it later, from their nodes: build it (make build) and run bin/horizon-bench", exe)
		}
		if contracts.IsIFEval(kid) || contracts.IsFidelity(kid) {
			return usageError("run: --scheduler slurm runs residency campaigns only; run the %s campaign %s locally", kid, campaign)
		}
		// The log shows each task's line; a bar would have no tokens to count.
		prog = campaigns.NewLog(os.Stderr)
		ro.Progress, ro.Scheduler, ro.Exe, ro.Poll = prog, f.slurm, exe, f.slurmPoll
	}
	res, err := run(ctx, ro)
	var stopped *campaigns.StoppedError
	var prepared *campaigns.PreparedError
	switch {
	case errors.As(err, &prepared):
		fmt.Fprintf(c.App.Writer, "artifacts of %s ready in %s (--prepare-only: no worker run, no edition written):\n",
			prepared.Edition, time.Since(start).Round(100*time.Millisecond))
		for _, d := range prepared.Artifacts {
			fmt.Fprintf(c.App.Writer, "  %s\n", d)
		}
		return nil
	case errors.As(err, &stopped):
		msg := fmt.Sprintf("stopped by --stop-after %v after %s: %d workers run now, %d of %d workers remain",
			f.stopAfter, time.Since(start).Round(time.Second), res.Ran, stopped.Remaining, stopped.Workers)
		if stopped.Artifacts > 0 {
			msg += fmt.Sprintf(", %d artifact(s) still to prepare", stopped.Artifacts)
		}
		return cli.Exit(fmt.Sprintf("%s (run directory %s); run the same command again to resume (exit %d)",
			msg, stopped.RunDir, exitStopped), exitStopped)
	case errors.Is(err, campaigns.ErrInvalid), errors.Is(err, campaigns.ErrEditionExists), errors.Is(err, campaigns.ErrNotEdition),
		errors.Is(err, campaigns.ErrArraysInRunDir):
		return cli.Exit(err.Error(), exitUsage)
	case errors.Is(err, context.Canceled) && f.slurm != nil:
		return fmt.Errorf("interrupted; the job array keeps running on the cluster: run the same command again to adopt it")
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("interrupted; finished workers are kept, run the same command again to resume")
	case err != nil:
		return err
	}
	fmt.Fprintf(c.App.Writer, "edition %s written to %s: %d workers (%d run now, %d finished before) in %s\n",
		res.Edition, res.Dir, res.Workers, res.Ran, res.Workers-res.Ran, res.Elapsed.Round(100*time.Millisecond))
	return nil
}
