package slurm

import (
	"errors"
	"fmt"
	"strings"

	"github.com/horizon-runmap/horizon/campaigns"
)

// Script renders the sbatch script of an array: directives (job name,
// array range, log path, one task, the time limit, the device request),
// then a case on SLURM_ARRAY_TASK_ID holding each task's worker flags, and
// the exec of the executable's worker subcommand. Every value is quoted
// for the shell; paths must be absolute, since the task starts in whatever
// directory Slurm gives it.
func Script(a campaigns.Array, timeLimit string) (string, error) {
	switch {
	case len(a.Tasks) == 0:
		return "", errors.New("slurm: an array of no tasks")
	case a.Name == "" || strings.ContainsAny(a.Name, " \t\n'\"\\$`"):
		return "", fmt.Errorf("slurm: job name %q: want a name without spaces or quotes", a.Name)
	case !strings.HasPrefix(a.Exe, "/") || !strings.HasPrefix(a.LogDir, "/") || !strings.HasPrefix(a.RunDir, "/"):
		return "", fmt.Errorf("slurm: the executable (%q), run directory (%q) and log directory (%q) must be absolute paths", a.Exe, a.RunDir, a.LogDir)
	case a.Build == "":
		return "", errors.New("slurm: no build hash for the tasks to check")
	case strings.ContainsAny(a.LogDir, "%\n") || strings.ContainsAny(timeLimit, " \n"):
		return "", fmt.Errorf("slurm: log directory %q holds '%%' or a newline, or time limit %q a space", a.LogDir, timeLimit)
	}
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("#!/bin/bash")
	w("# Written by horizon-bench run --scheduler slurm: %d workers of %s, one array task each.", len(a.Tasks), a.Name)
	w("# Each task runs the worker subcommand, which writes its raw record into the run")
	w("# directory and journals it. Submitted with sbatch; arguments given on its command")
	w("# line (--slurm-args) override these directives.")
	w("#SBATCH --job-name=%s", a.Name)
	w("#SBATCH --array=0-%d", len(a.Tasks)-1)
	w("#SBATCH --output=%s/%%A_%%a.log", a.LogDir)
	w("#SBATCH --ntasks=1")
	w("#SBATCH --time=%s", timeLimit)
	switch a.Device {
	case "cuda":
		w("#SBATCH --gres=gpu:1")
	case "cpu":
		// The CPU is the measured device: one worker per node.
		w("#SBATCH --exclusive")
	}
	w("set -euo pipefail")
	w(`case "${SLURM_ARRAY_TASK_ID:?not run as a job array task}" in`)
	for i, t := range a.Tasks {
		flags := t.TaskFlags(a.RunDir, a.Build)
		q := make([]string, len(flags))
		for k, f := range flags {
			q[k] = shellQuote(f)
		}
		w("%d) flags=(%s) ;;", i, strings.Join(q, " "))
	}
	w(`*) echo "task $SLURM_ARRAY_TASK_ID: no such worker in this array" >&2; exit 2 ;;`)
	w("esac")
	w(`echo "task ${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID} on $(hostname): worker ${flags[*]}"`)
	w("exec %s worker \"${flags[@]}\"", shellQuote(a.Exe))
	return b.String(), nil
}

// shellQuote quotes s for bash: single quotes, each ' as '\”.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
