package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/horizon-runmap/horizon/campaigns"
	"github.com/horizon-runmap/horizon/campaigns/worker"
	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/runtime/device"
	"github.com/horizon-runmap/horizon/runtime/observe"
)

func workerCommand() *cli.Command {
	return &cli.Command{
		Name:   "worker",
		Hidden: true,
		Usage:  "internal: measure one block of one configuration (started by `horizon-bench run`)",
		Description: `run re-executes horizon-bench as one worker process per (configuration,
block), so that RSS and VRAM peaks are whole-worker observations. The worker
reads the frozen campaign and contract of the run directory, loads the
prepared artifact, runs the warmup and the block's prompts, and writes its
raw record atomically to --out. Progress lines go to --progress-fd.

As a job array task (run --scheduler slurm) it is given --run-dir,
--journal-key and --build: it refuses to run when this executable's SHA-256
is not --build, waits until no artifact preparation holds the artifact lock,
runs, then checks its record against the contract and journals it in the run
directory itself (under the journal lock), as the local runner does.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "campaign", Required: true, Usage: "frozen campaign.json"},
			&cli.StringFlag{Name: "contract", Required: true, Usage: "frozen contract.json"},
			&cli.StringFlag{Name: "config", Required: true, Usage: "configuration id"},
			&cli.IntFlag{Name: "block", Required: true, Usage: "block, from 1"},
			&cli.StringFlag{Name: "artifact", Required: true, Usage: "prepared artifact directory"},
			&cli.StringFlag{Name: "reference-artifact", Usage: "a fidelity worker's reference arm's prepared artifact directory (--config and --artifact are the pair's treatment arm)"},
			&cli.StringFlag{Name: "out", Required: true, Usage: "raw record path"},
			&cli.StringFlag{Name: "prefill", Usage: "run the prompts with this prefill (token, batched) where the configuration leaves it auto: a reproduction's rerun of a record whose build resolved auto otherwise (raw version 2 on cuda ran it token at a time)"},
			&cli.IntFlag{Name: "progress-fd", Usage: "file descriptor for progress lines (0: none)"},
			&cli.StringFlag{Name: "run-dir", Usage: "as a job array task: the run `DIR`, whose journal the worker adds its record to"},
			&cli.StringFlag{Name: "journal-key", Usage: "as a job array task: the work `KEY` to journal the record with"},
			&cli.StringFlag{Name: "build", Usage: "as a job array task: the `SHA256` this executable must have"},
		},
		Action: runWorkerCmd,
	}
}

func runWorkerCmd(c *cli.Context) (err error) {
	started := worker.Started()
	task := c.String("journal-key") != ""
	if task != (c.String("run-dir") != "") || task != (c.String("build") != "") {
		return usageError("worker: --run-dir, --journal-key and --build go together (a job array task)")
	}
	if task {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("worker: find this executable: %w", err)
		}
		if err := campaigns.CheckBuild(exe, c.String("build")); err != nil {
			return fmt.Errorf("worker: %w", err)
		}
		if err := campaigns.WaitPreparation(c.String("artifact")); err != nil {
			return fmt.Errorf("worker: %w", err)
		}
		// The worker starts now: hashing the executable and waiting for a
		// preparation are the scheduler's business, not the worker's
		// preparation_seconds (nor its wall clock).
		started = time.Now()
	}
	kid, err := campaigns.FrozenContractID(c.String("contract"))
	if err != nil {
		return err
	}
	if c.String("prefill") != "" && (contracts.IsIFEval(kid) || contracts.IsFidelity(kid)) {
		return usageError("worker: --prefill pins a performance worker's prefill for a reproduction; contract %s's workers run their configuration's", kid)
	}
	if contracts.IsIFEval(kid) {
		if task {
			return usageError("worker: IFEval shards do not run as job array tasks")
		}
		return runIFEvalWorker(c, started)
	}
	if contracts.IsFidelity(kid) {
		return runFidelityWorker(c, started)
	}
	camp, contract, sha, err := campaigns.LoadFrozen(c.String("campaign"), c.String("contract"))
	if err != nil {
		return err
	}
	// Device memory is sampled from here to the last request, so the
	// whole-worker peak includes preparation and warmup.
	var sampler observe.VRAMSampler
	if camp.Device == "cuda" {
		if sampler, err = observe.StartVRAM(0, observe.DefaultVRAMInterval); err != nil {
			fmt.Fprintf(os.Stderr, "worker: VRAM will be UNKNOWN: %v\n", err)
			sampler = nil
		}
	}
	cfg, ok := camp.Config(c.String("config"))
	if !ok {
		return usageError("worker: no configuration %q in %s", c.String("config"), c.String("campaign"))
	}
	if cfg, err = campaigns.PinPrefill(cfg, c.String("prefill")); err != nil {
		return usageError("worker: %v", err)
	}
	stopProfiles, err := startWorkerProfiles(cfg.ID, c.Int("block"))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stopProfiles()) }()
	dev, err := openDevice(camp.Device, camp.Threads)
	if err != nil {
		return err
	}
	defer dev.Close()
	wd := workerDevice(camp, dev, sampler)
	progress, closeProgress := progressWriter(c)
	defer closeProgress()
	if err := worker.Run(worker.Options{
		Contract: contract, ContractSHA: sha, Campaign: camp, Config: cfg, Block: c.Int("block"),
		ArtifactDir: c.String("artifact"), Out: c.String("out"), Device: wd, Started: started, Progress: progress,
	}); err != nil || !task {
		return err
	}
	rel, sum, err := campaigns.JournalTask(c.String("run-dir"), c.String("journal-key"), contract, camp, cfg, c.Int("block"))
	if err != nil {
		return fmt.Errorf("worker: journal the record: %w", err)
	}
	host, _ := os.Hostname()
	fmt.Fprintf(c.App.Writer, "worker: %s block %d on %s: %s journaled (sha256 %s) in %s\n",
		cfg.ID, c.Int("block"), host, rel, sum, time.Since(started).Round(100*time.Millisecond))
	return nil
}

// runIFEvalWorker generates one shard of an IFEval campaign's prompts.
func runIFEvalWorker(c *cli.Context, started time.Time) error {
	camp, contract, sha, err := campaigns.LoadFrozenIFEval(c.String("campaign"), c.String("contract"))
	if err != nil {
		return err
	}
	cfg, ok := camp.Config(c.String("config"))
	if !ok {
		return usageError("worker: no configuration %q in %s", c.String("config"), c.String("campaign"))
	}
	dev, err := openDevice(camp.Device, camp.Threads)
	if err != nil {
		return err
	}
	defer dev.Close()
	wd := workerDevice(camp, dev, nil)
	wd.H2DBandwidth = nil // an IFEval shard records no transfer bandwidth
	progress, closeProgress := progressWriter(c)
	defer closeProgress()
	return worker.RunIFEval(worker.IFEvalOptions{
		Contract: contract, ContractSHA: sha, Campaign: camp, Config: cfg, Shard: c.Int("block"),
		ArtifactDir: c.String("artifact"), Out: c.String("out"), Device: wd, Started: started, Progress: progress,
	})
}

// runFidelityWorker generates one shard of a fidelity campaign's prompts
// with both arms of a pair and compares them teacher-forced.
func runFidelityWorker(c *cli.Context, started time.Time) error {
	camp, contract, sha, err := campaigns.LoadFrozenFidelity(c.String("campaign"), c.String("contract"))
	if err != nil {
		return err
	}
	pairs, err := camp.Pairs(contract)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(pairs, func(p campaigns.Pair) bool { return p.Treatment.ID == c.String("config") })
	if i < 0 {
		return usageError("worker: no arm pair with treatment %q in %s", c.String("config"), c.String("campaign"))
	}
	if c.String("reference-artifact") == "" {
		return usageError("worker: a fidelity worker needs --reference-artifact (the reference arm %s's artifact)", pairs[i].Reference.ID)
	}
	dev, err := openDevice(camp.Device, camp.Threads)
	if err != nil {
		return err
	}
	defer dev.Close()
	wd := workerDevice(camp, dev, nil)
	wd.H2DBandwidth = nil // a fidelity shard records no transfer bandwidth
	progress, closeProgress := progressWriter(c)
	defer closeProgress()
	return worker.RunFidelity(worker.FidelityOptions{
		Contract: contract, ContractSHA: sha, Campaign: camp, Reference: pairs[i].Reference, Treatment: pairs[i].Treatment,
		Shard: c.Int("block"), ReferenceDir: c.String("reference-artifact"), TreatmentDir: c.String("artifact"),
		Out: c.String("out"), Device: wd, Started: started, Progress: progress,
	})
}

// workerDevice describes the opened device to a worker: its backend and
// rows, the CPU threads, the VRAM sampler (nil: none), and what the device
// can observe beyond its ops. On cuda those are the pinned H2D bandwidth
// (256 MiB copies, median of 5) and the GPU's name and driver; a device
// without them leaves those observations UNSUPPORTED on the cpu and
// UNKNOWN on cuda, and an error makes one UNKNOWN, its reason on stderr
// (the record keeps none).
func workerDevice(camp *campaigns.Campaign, dev *device.Opened, sampler observe.VRAMSampler) worker.Device {
	wd := worker.Device{Name: camp.Device, Backend: dev.Backend, Rows: dev.Rows, VRAM: sampler}
	if camp.Device == "cpu" {
		wd.Threads = camp.Threads
		if wd.Threads == 0 {
			wd.Threads = runtime.GOMAXPROCS(0)
		}
	}
	if dev.MeasureH2D != nil {
		wd.H2DBandwidth = func() (float64, error) {
			bw, err := dev.MeasureH2D()
			if err != nil {
				fmt.Fprintf(os.Stderr, "worker: H2D bandwidth will be UNKNOWN: %v\n", err)
			}
			return bw, err
		}
	}
	if dev.Info != nil {
		var err error
		if wd.GPU, wd.Driver, err = dev.Info(); err != nil {
			fmt.Fprintf(os.Stderr, "worker: GPU name or driver version will be UNKNOWN: %v\n", err)
		}
	}
	return wd
}

// progressWriter is the worker's progress stream (--progress-fd; nil
// without one) and what closes it.
func progressWriter(c *cli.Context) (io.Writer, func()) {
	fd := c.Int("progress-fd")
	if fd <= 0 {
		return nil, func() {}
	}
	f := os.NewFile(uintptr(fd), "progress")
	return f, func() { f.Close() }
}
