// Command horizon-bench runs MoE models under a GPU-memory budget and writes
// benchmark editions. Each subcommand lives in its own file.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/horizon-runmap/horizon/editions"
)

// exitUsage is the exit code for bad flags or arguments.
const exitUsage = 2

// cudaBuild is set by a cuda-tagged build (device_cuda.go).
var cudaBuild = false

func newApp() *cli.App {
	app := &cli.App{
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
through the same prepare and generate commands.

Exit codes (every command):
   0   success
   1   the work failed (a device or file error, a reproduction that differs)
   2   usage: unknown command or flag, bad flag value, missing or wrong file
       argument, invalid campaign (one line on stderr; --help for more)
   75  run stopped by --stop-after with work left (run it again to resume)`,
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
			compareCommand(),
			reportCommand(),
			republishCommand(),
			ifevalCommand(),
		},
		// No subcommand prints the help; an unknown one is a usage error.
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return usageError("unknown command %q (horizon-bench --help lists them)", c.Args().First())
			}
			return cli.ShowAppHelp(c)
		},
		Flags: []cli.Flag{&cli.BoolFlag{Name: "version", Usage: "print the version (module, VCS revision and time, Go version, devices) and exit"}},
		Before: func(c *cli.Context) error {
			if c.Bool("version") {
				fmt.Fprint(c.App.Writer, editions.ReadBuildInfo().VersionText("horizon-bench", cudaBuild))
				os.Exit(0)
			}
			return nil
		},
		HideVersion:    true,
		OnUsageError:   onUsageError("horizon-bench"),
		ExitErrHandler: func(c *cli.Context, err error) {},
	}
	for _, cmd := range app.Commands {
		if cmd.OnUsageError == nil {
			cmd.OnUsageError = onUsageError("horizon-bench " + cmd.Name)
		}
	}
	return app
}

// onUsageError turns a flag the parser refused (unknown, or a bad value)
// into a one-line usage error, exit 2, instead of the whole help.
func onUsageError(prog string) cli.OnUsageErrorFunc {
	return func(c *cli.Context, err error, _ bool) error {
		return usageError("%v (see %s --help)", err, prog)
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
