package main

import (
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/urfave/cli/v2"

	"github.com/horizon-runmap/horizon/campaigns"
	"github.com/horizon-runmap/horizon/campaigns/worker"
	"github.com/horizon-runmap/horizon/runtime/observe"
)

// Device observation hooks. They are nil until a cuda-tagged build opens
// the cuda device (openCUDA in device_cuda.go sets them), so they stay nil
// on the cpu device of every build; while nil, the observations are
// UNSUPPORTED on the cpu device and UNKNOWN on cuda (and a contract that
// requires them there fails the worker at its start):
//
//   - h2dBandwidth measures pinned host-to-device bandwidth on the opened
//     device, in bytes per second (256 MiB copies, median of 5); an error
//     makes it UNKNOWN.
//   - gpuInfo names the GPU and the driver version; "" for either makes it
//     UNKNOWN.
//
// VRAM needs no hook: on cuda the worker starts runtime/observe's NVML
// sampler (which a build without the cuda tag reports as unsupported).
var (
	h2dBandwidth func(d *device) (float64, error)
	gpuInfo      func(d *device) (name, driver string)
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
raw record atomically to --out. Progress lines go to --progress-fd.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "campaign", Required: true, Usage: "frozen campaign.json"},
			&cli.StringFlag{Name: "contract", Required: true, Usage: "frozen contract.json"},
			&cli.StringFlag{Name: "config", Required: true, Usage: "configuration id"},
			&cli.IntFlag{Name: "block", Required: true, Usage: "block, from 1"},
			&cli.StringFlag{Name: "artifact", Required: true, Usage: "prepared artifact directory"},
			&cli.StringFlag{Name: "out", Required: true, Usage: "raw record path"},
			&cli.IntFlag{Name: "progress-fd", Usage: "file descriptor for progress lines (0: none)"},
		},
		Action: runWorkerCmd,
	}
}

func runWorkerCmd(c *cli.Context) (err error) {
	started := worker.Started()
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
	dev, err := openDevice(camp.Device, camp.Threads)
	if err != nil {
		return err
	}
	defer dev.Close()
	wd := worker.Device{Name: camp.Device, Backend: dev.Backend, Rows: dev.Rows, VRAM: sampler}
	if camp.Device == "cpu" {
		wd.Threads = camp.Threads
		if wd.Threads == 0 {
			wd.Threads = runtime.GOMAXPROCS(0)
		}
	}
	if h2dBandwidth != nil {
		wd.H2DBandwidth = func() (float64, error) { return h2dBandwidth(dev) }
	}
	if gpuInfo != nil {
		wd.GPU, wd.Driver = gpuInfo(dev)
	}
	var progress io.Writer
	if fd := c.Int("progress-fd"); fd > 0 {
		f := os.NewFile(uintptr(fd), "progress")
		defer f.Close()
		progress = f
	}
	return worker.Run(worker.Options{
		Contract: contract, ContractSHA: sha, Campaign: camp, Config: cfg, Block: c.Int("block"),
		ArtifactDir: c.String("artifact"), Out: c.String("out"), Device: wd, Started: started, Progress: progress,
	})
}
