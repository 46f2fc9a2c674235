package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/horizon-runmap/horizon/ceilings"
)

func ceilingsCommand() *cli.Command {
	d := ceilings.DefaultOptions()
	return &cli.Command{
		Name:      "ceilings",
		Usage:     "put editions' speeds beside their HBM, PCIe and VRAM ceilings and a peer baseline (Markdown)",
		ArgsUsage: "EDITION_DIR...",
		Description: `Recomputes, from the raw records of the editions given, each configuration's
pooled decode rate beside the rate the HBM bandwidth allows for the bytes a
decode step reads (and, at partial residency, the missed expert bytes over
the pinned H2D bandwidth each worker measured); checks every partial
configuration against full-residency time + missed bytes / H2D bandwidth
(within --partial-factor); checks whole-worker VRAM against resident weights
+ KV cache + --vram-allowance-gib; for an edition of a depth contract
(PERF-DEPTH-v1), each cuda configuration's decode per context depth beside
bandwidth / (weight bytes + the KV read at that depth); for an edition
of a prefill contract (PERF-PREFILL-v1), each configuration's isolated
prefill per prompt length beside the weights read once over the HBM
bandwidth, the arithmetic over the tensor-core and CUDA-core rates, and at
partial residency full-residency prefill + H2D bytes / bandwidth; and, with
--baseline, the speedup over a peer baseline from scripts/baseline_hf.py on
the same synthetic checkpoint; with --peer, each full-residency configuration
beside llama-bench's tests of the same synthetic checkpoint (prefill against
ppT, decode at depth d against tgN @ dd and that depth's prefill against ppd,
pooled decode against tg128), with the ratio only where both ran on the same
GPU (docs/peers.md).

The figures belong to one GPU (--gpu, the H200 by default): a configuration
whose raw records name another GPU gets UNKNOWN for its ceilings, and the
output names it. For another GPU, give its measured bandwidth and its name:

  horizon-bench ceilings --gpu "NVIDIA H100 80GB HBM3" --hbm-tbps 3.08 \
      --hbm-source "H100 stream read, results/h100-s27" editions/ttft-v1

Example (the H200 editions of issue 7):

  horizon-bench ceilings --baseline results/h200-editions/baseline-olmoe-1b-7b-924-eager.json \
      --out results/h200-editions/CEILINGS.md editions/technical-preview-v3 editions/residency-ablation

The llama.cpp peer of session 36 beside the H100's ttft-v1 (results/h100-s36):

  horizon-bench ceilings --gpu "NVIDIA H100 80GB HBM3" --hbm-tbps 3.08 \
      --peer results/h100-s36/call1/llama-bench.jsonl \
      --peer results/h100-s36/call2/llq/llama-bench.jsonl ttft-v1

Flags go before the edition directories.`,
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "baseline", Usage: "baseline JSON from scripts/baseline_hf.py (repeatable)"},
			&cli.StringSliceFlag{Name: "peer", Usage: "llama-bench JSON Lines (-o jsonl) from scripts/llamacpp/llamacpp-h200.sh (repeatable): adds the llama.cpp peer section"},
			&cli.Float64Flag{Name: "hbm-tbps", Value: d.HBMBytesPerS / 1e12, Usage: "HBM bandwidth ceiling in TB/s"},
			&cli.StringFlag{Name: "hbm-source", Value: d.HBMSource, Usage: "where the HBM figure comes from (printed)"},
			&cli.StringFlag{Name: "gpu", Value: d.GPU, Usage: "the GPU the figures are for, as raw records name it (environment.gpu); configurations measured on another GPU get no ceiling (UNKNOWN). The tensor-core and CUDA-core rates stay the H200's (NVIDIA's figures, the H100 SXM's too)"},
			&cli.Float64Flag{Name: "partial-factor", Value: d.PartialFactor, Usage: "bound on partial time / (full time + transfer time)"},
			&cli.Float64Flag{Name: "vram-allowance-gib", Value: float64(d.VRAMAllowance) / (1 << 30),
				DefaultText: strconv.FormatFloat(math.Round(float64(d.VRAMAllowance)/(1<<30)*1000)/1000, 'f', -1, 64),
				Usage:       "VRAM allowed above resident weights + KV cache"},
			&cli.StringFlag{Name: "out", Value: "-", Usage: "Markdown file to write (- for stdout)"},
		},
		Action: runCeilings,
	}
}

func runCeilings(c *cli.Context) error {
	if c.NArg() == 0 {
		return usageError("ceilings: give at least one edition directory")
	}
	var confs []*ceilings.Config
	for _, dir := range c.Args().Slice() {
		if err := residencyEdition("ceilings", dir); err != nil {
			return err
		}
		cs, err := ceilings.LoadEdition(dir)
		if err != nil {
			return err
		}
		confs = append(confs, cs...)
	}
	var bls []ceilings.Baseline
	for _, f := range c.StringSlice("baseline") {
		b, err := ceilings.LoadBaseline(f)
		if err != nil {
			return err
		}
		bls = append(bls, b...)
	}
	var peers []ceilings.LlamaBench
	for _, f := range c.StringSlice("peer") {
		p, err := ceilings.LoadLlamaBench(f)
		if err != nil {
			return err
		}
		peers = append(peers, p...)
	}
	o := ceilings.DefaultOptions() // the prefill arithmetic's rates among them
	o.HBMBytesPerS, o.HBMSource, o.GPU = c.Float64("hbm-tbps")*1e12, c.String("hbm-source"), c.String("gpu")
	o.PartialFactor, o.VRAMAllowance = c.Float64("partial-factor"), int64(c.Float64("vram-allowance-gib")*(1<<30))
	if o.HBMBytesPerS <= 0 || o.PartialFactor <= 0 || o.VRAMAllowance < 0 {
		return usageError("ceilings: --hbm-tbps and --partial-factor must be positive, --vram-allowance-gib not negative")
	}
	if o.GPU == "" {
		return usageError("ceilings: --gpu must name a GPU (as raw records' environment.gpu does)")
	}
	write := func(w io.Writer) error {
		if err := ceilings.Write(w, confs, bls, o); err != nil {
			return err
		}
		if len(peers) == 0 {
			return nil
		}
		return ceilings.WritePeer(w, confs, peers, 2)
	}
	out := c.String("out")
	if out == "-" {
		return write(c.App.Writer)
	}
	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("ceilings: %w", err)
	}
	if err := write(f); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("ceilings: %w", err)
	}
	return os.Rename(tmp, out)
}
