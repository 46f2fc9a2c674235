package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/horizon-runmap/horizon/runtime/model"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// prepareBarMinBytes is the checkpoint size above which prepare shows a
// progress bar even when stderr is not a terminal.
const prepareBarMinBytes = 256 << 20

func prepareCommand() *cli.Command {
	return &cli.Command{
		Name:      "prepare",
		Usage:     "convert a checkpoint into an artifact: INT4 (or FP16) routed experts + FP16 everything else",
		UsageText: "horizon-bench prepare --checkpoint DIR --out DIR [--experts int4|fp16] [--json]",
		Description: `Reads a Hugging Face checkpoint (real or synthetic: config.json, safetensors,
tokenizer.json) and writes an artifact directory:

   experts.bin             every routed expert as one record (gate, up, down),
                           [layer][expert], in qpack-int4-b256-v1 (4-bit values,
                           one FP16 scale per 256 inputs) or FP16 (--experts fp16)
   nonrouted.safetensors   attention, norms, router, embeddings, lm_head and
                           Qwen's shared expert, converted to FP16
   artifact.json           identity, dtypes, layout, SHA-256 of every file and
                           tensor, and the preparation report
   config.json, tokenizer.json, ...   copied from the checkpoint

The artifact is written to a temporary sibling of --out and renamed into
place at the end; --out must not exist or be an empty directory. The same
checkpoint always gives byte-identical files. NaN or infinite weights are
an error naming the tensor.

Prints the preparation report: scheme, records x bytes, saturated values,
clamped values, padded columns, max quantisation error and the artifact
SHA-256; --json prints the report as JSON instead.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "checkpoint", Usage: "checkpoint `DIR` (required)"},
			&cli.StringFlag{Name: "out", Usage: "artifact `DIR` (required; must not exist, or be empty)"},
			&cli.StringFlag{Name: "experts", Value: "int4", Usage: "routed-expert storage: int4 (" + string(qpack.SchemeInt4) + ") or fp16"},
			&cli.BoolFlag{Name: "json", Usage: "print the preparation report as JSON on stdout"},
		},
		Action: runPrepare,
	}
}

func runPrepare(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageError("prepare: unexpected arguments %q", c.Args().Slice())
	}
	var missing []string
	for _, f := range []string{"checkpoint", "out"} {
		if c.String(f) == "" {
			missing = append(missing, "--"+f)
		}
	}
	if len(missing) > 0 {
		return usageError("prepare: missing %s", strings.Join(missing, ", "))
	}
	var scheme qpack.Scheme
	switch c.String("experts") {
	case "int4":
		scheme = qpack.SchemeInt4
	case "fp16":
		scheme = qpack.SchemeFP16
	default:
		return usageError("prepare: --experts %q: want int4 or fp16", c.String("experts"))
	}

	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	showBar := term.IsTerminal(int(os.Stderr.Fd()))
	var bar *progressbar.ProgressBar
	start := time.Now()
	out := c.String("out")
	rep, err := qpack.Prepare(qpack.PrepareOptions{
		Checkpoint: c.String("checkpoint"),
		Out:        out,
		Scheme:     scheme,
		Ctx:        ctx,
		Progress: func(done, total int64) {
			if bar == nil {
				if !showBar && total <= prepareBarMinBytes {
					return
				}
				bar = progressbar.DefaultBytes(total, "prepare")
			}
			bar.Set64(done)
		},
	})
	if bar != nil {
		bar.Finish()
	}
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted; nothing was written: %w", err)
		}
		return err
	}
	elapsed := time.Since(start)

	if c.Bool("json") {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	a, err := qpack.Open(out)
	if err != nil {
		return fmt.Errorf("prepared %s, but it does not open: %w", out, err)
	}
	printPrepareReport(a, rep, elapsed)
	return nil
}

// printPrepareReport renders the report for a person.
func printPrepareReport(a *qpack.Artifact, rep qpack.Report, elapsed time.Duration) {
	d := a.Meta.DTypes
	scale := "none"
	if d.ScaleDType != nil {
		scale = *d.ScaleDType
	}
	fmt.Printf("prepared %s in %.1fs\n", a.Dir, elapsed.Seconds())
	fmt.Printf("  source             %s (%s, %s)\n", a.Meta.Identity.Source.Dir, a.Meta.Identity.Arch, d.OriginalDType)
	fmt.Printf("  routed experts     %s (scales %s, activations %s, accumulation %s)\n", rep.Scheme, scale, d.ActivationDType, d.AccumulationDType)
	fmt.Printf("  records            %d x %d bytes = %d bytes (%s)\n", rep.Records, rep.RecordBytes, rep.ExpertBytes, a.Meta.Experts.Order)
	fmt.Printf("  non-routed         %d bytes %s\n", rep.NonRoutedBytes, d.NonRoutedDType)
	var padded []string
	l := a.Layout()
	for i, m := range l.Matrices() {
		if m.ColsPadded != m.Cols {
			padded = append(padded, fmt.Sprintf("%s %d -> %d", model.ExpertProjs[i], m.Cols, m.ColsPadded))
		}
	}
	if len(padded) == 0 {
		padded = []string{"none"}
	}
	fmt.Printf("  padded columns     %s\n", strings.Join(padded, ", "))
	fmt.Printf("  saturated values   %d non-routed, %d routed, %d scales (clamped to ±65504)\n",
		rep.SaturatedNonRouted, rep.SaturatedRouted, rep.SaturatedScales)
	if rep.Scheme == qpack.SchemeInt4 {
		q := rep.Quant
		fmt.Printf("  quantisation       %d values, %d clamped, %d zero blocks, %d underflow blocks, %d padding values\n",
			q.Values, q.ClampedValues, q.ZeroBlocks, q.UnderflowBlocks, q.PaddedValues)
		fmt.Printf("  max abs error      %.6g\n", q.MaxAbsErr)
	}
	fmt.Printf("  checkpoint sha256  %s\n", a.Meta.Identity.Source.CheckpointSHA256)
	fmt.Printf("artifact sha256 %s\n", rep.ArtifactSHA256)
}
