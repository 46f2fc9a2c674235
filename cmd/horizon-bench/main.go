// Command horizon-bench runs MoE models under a GPU-memory budget and writes
// benchmark editions. Each subcommand lives in its own file.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"
)

// exitUsage is the exit code for bad flags or arguments.
const exitUsage = 2

func newApp() *cli.App {
	return &cli.App{
		Name:  "horizon-bench",
		Usage: "run MoE inference under a GPU-memory budget and measure it",
		Description: `Horizon runs OLMoE and Qwen2-MoE models with INT4 routed experts kept compact on
the device, a complete read-only host copy of every expert, and a budgeted
per-layer expert cache.

Typical flow on a synthetic model (no downloads needed):

   horizon-bench synth    --arch olmoe-tiny --seed 1 --out /tmp/ckpt
   horizon-bench prepare  --checkpoint /tmp/ckpt --out /tmp/art
   horizon-bench generate --artifact /tmp/art --prompt "Hello" --tokens 32

Real Hugging Face checkpoints (config.json, safetensors, tokenizer.json) go
through the same prepare and generate commands.`,
		Commands: []*cli.Command{
			synthCommand(),
			prepareCommand(),
			generateCommand(),
			runCommand(),
			workerCommand(),
			ceilingsCommand(),
			reproduceCommand(),
			keygenCommand(),
			attestCommand(),
			simulateCommand(),
		},
		ExitErrHandler: func(c *cli.Context, err error) {},
	}
}

func main() {
	if err := newApp().Run(os.Args); err != nil {
		fmt.Fprintf(os.Stderr, "horizon-bench: %v\n", err)
		var ec cli.ExitCoder
		if errors.As(err, &ec) {
			os.Exit(ec.ExitCode())
		}
		os.Exit(1)
	}
}

// usageError marks a bad invocation (exit code 2).
func usageError(format string, args ...any) error {
	return cli.Exit(fmt.Sprintf(format, args...), exitUsage)
}
