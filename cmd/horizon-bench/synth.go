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
)

// synthBarMinBytes is the checkpoint size above which synth shows a progress
// bar even when stderr is not a terminal.
const synthBarMinBytes = 256 << 20

func synthCommand() *cli.Command {
	return &cli.Command{
		Name:      "synth",
		Usage:     "write a deterministic synthetic checkpoint with a real model's exact shapes",
		UsageText: "horizon-bench synth --arch NAME --seed N --out DIR [--shard-bytes N] [--json]",
		Description: `Writes a Hugging Face layout checkpoint (config.json, generation_config.json,
tokenizer.json, BF16 safetensors, horizon-synth.json) whose tensors have the
exact names and shapes of the architecture, with values drawn from
normal(0, 0.02) per tensor (norm weights 1.0), rounded to BF16 and flushed so
that every value is exact in FP16. The same --arch and --seed always give
byte-identical files. Tensor data over --shard-bytes is split into
model-0000i-of-0000N.safetensors shards with model.safetensors.index.json.

The checkpoint is written to a temporary sibling of --out and renamed into
place at the end; --out must not exist or be an empty directory.

Architectures (--arch):
` + presetList() + `
Prints every file with its size and SHA-256 and the checkpoint SHA-256
(SHA-256 of the "<sha256>  <path>" lines, as sha256sum prints them);
--json prints {"files": [{"path", "bytes", "sha256"}], "sha256"} instead.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "arch", Usage: "architecture preset (required; see above)"},
			&cli.Uint64Flag{Name: "seed", Usage: "seed of the tensor values (required)"},
			&cli.StringFlag{Name: "out", Usage: "output `DIR` (required; must not exist, or be empty)"},
			&cli.Int64Flag{Name: "shard-bytes", Usage: "max tensor bytes per safetensors shard (0: 2 GiB)"},
			&cli.BoolFlag{Name: "json", Usage: "print the file list and digests as JSON on stdout"},
		},
		Action: runSynth,
	}
}

// presetList renders the presets for the help text, one per line.
func presetList() string {
	var b strings.Builder
	for _, name := range model.PresetNames() {
		p, err := model.LookupPreset(name)
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "   %-16s %s\n", name, p.Description)
	}
	return b.String()
}

func runSynth(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageError("synth: unexpected arguments %q", c.Args().Slice())
	}
	var missing []string
	for _, f := range []string{"arch", "seed", "out"} {
		if !c.IsSet(f) {
			missing = append(missing, "--"+f)
		}
	}
	if len(missing) > 0 {
		return usageError("synth: missing %s (architectures: %s)", strings.Join(missing, ", "), strings.Join(model.PresetNames(), ", "))
	}
	arch := c.String("arch")
	if _, err := model.LookupPreset(arch); err != nil {
		return usageError("synth: %v", err)
	}
	if c.Int64("shard-bytes") < 0 {
		return usageError("synth: --shard-bytes must not be negative")
	}

	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	showBar := term.IsTerminal(int(os.Stderr.Fd()))
	var bar *progressbar.ProgressBar
	start := time.Now()
	res, err := model.Synthesize(model.SynthOptions{
		Arch:       arch,
		Seed:       c.Uint64("seed"),
		OutDir:     c.String("out"),
		ShardBytes: c.Int64("shard-bytes"),
		Ctx:        ctx,
		Progress: func(done, total int64) {
			if bar == nil {
				if !showBar && total <= synthBarMinBytes {
					return
				}
				bar = progressbar.DefaultBytes(total, "synth "+arch)
			}
			bar.Set64(done)
		},
	})
	if bar != nil {
		if err != nil {
			bar.Exit() // leave the bar where it stopped
			fmt.Fprintln(os.Stderr)
		} else {
			bar.Finish()
		}
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
		return enc.Encode(res)
	}
	var total int64
	for _, f := range res.Files {
		total += f.Bytes
	}
	fmt.Printf("wrote %s: %s seed %d, %d files, %d bytes in %.1fs (%.0f MB/s)\n",
		c.String("out"), arch, c.Uint64("seed"), len(res.Files), total, elapsed.Seconds(),
		float64(total)/1e6/max(elapsed.Seconds(), 1e-9))
	for _, f := range res.Files {
		fmt.Printf("  %s  %14d  %s\n", f.SHA256, f.Bytes, f.Path)
	}
	fmt.Printf("checkpoint sha256 %s\n", res.SHA256)
	return nil
}
