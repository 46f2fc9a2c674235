package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/horizon-runmap/horizon/campaigns"
)

func runCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "run a benchmark campaign and publish its edition",
		UsageText: "horizon-bench run <campaign.yaml> [--out DIR] [--run-dir DIR] [--force] [--contract FILE]",
		Description: `Runs every configuration of the campaign under its contract (PERF-REAL-v1 for
the committed campaigns): one worker process per (configuration, block), one
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
interrupted resumes where it stopped when started again. The edition is
assembled next to its destination and renamed into place only when
complete; an existing edition is replaced (atomically) only with --force.

--contract runs the campaign against a contract file instead of the built-in
contract it names (the campaign must still declare that contract's hash).`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Usage: "edition `DIR` (default editions/<edition>)"},
			&cli.StringFlag{Name: "run-dir", Usage: "run `DIR` for artifacts and finished workers (default runs/<edition>)"},
			&cli.BoolFlag{Name: "force", Usage: "replace an existing edition"},
			&cli.StringFlag{Name: "contract", Usage: "contract `FILE` instead of the built-in one"},
		},
		Action: runRun,
	}
}

// runFlags are the run command's flag values. urfave/cli stops parsing
// at the first argument, so flags after the campaign file
// (`run campaigns/smoke.yaml --out DIR`) are parsed here.
type runFlags struct {
	out, runDir, contract string
	force                 bool
}

func parseRunArgs(c *cli.Context) (string, runFlags, error) {
	f := runFlags{out: c.String("out"), runDir: c.String("run-dir"), contract: c.String("contract"), force: c.Bool("force")}
	args := c.Args().Slice()
	if len(args) == 0 {
		return "", f, usageError("run: which campaign? e.g. horizon-bench run campaigns/smoke.yaml")
	}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.out, "out", f.out, "")
	fs.StringVar(&f.runDir, "run-dir", f.runDir, "")
	fs.StringVar(&f.contract, "contract", f.contract, "")
	fs.BoolVar(&f.force, "force", f.force, "")
	if err := fs.Parse(args[1:]); err != nil {
		return "", f, usageError("run: %v", err)
	}
	if fs.NArg() > 0 {
		return "", f, usageError("run takes one campaign file, got also %q", fs.Args())
	}
	return args[0], f, nil
}

func runRun(c *cli.Context) error {
	campaign, f, err := parseRunArgs(c)
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this executable to start workers: %w", err)
	}
	launch := func(a campaigns.WorkerArgs) (*exec.Cmd, error) {
		return exec.Command(exe, append([]string{"worker"}, a.Flags()...)...), nil
	}
	var prog campaigns.Progress = campaigns.NewLog(os.Stderr)
	if term.IsTerminal(int(os.Stderr.Fd())) {
		prog = campaigns.NewBar(os.Stderr)
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := campaigns.Run(ctx, campaigns.RunOptions{
		Campaign: campaign, Contract: f.contract, Out: f.out,
		RunDir: f.runDir, Force: f.force, Launch: launch, Progress: prog,
	})
	switch {
	case errors.Is(err, campaigns.ErrInvalid), errors.Is(err, campaigns.ErrEditionExists):
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
