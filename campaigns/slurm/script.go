package slurm

import (
	"errors"
	"fmt"
	"strings"

	"github.com/horizon-runmap/horizon/campaigns"
)

// Script renders the sbatch script of an array: directives (job name,
// array range, log path, one task, the time limit, the device request, the
// node where the array is pinned), then a case on SLURM_ARRAY_TASK_ID
// running each of the task's workers in turn as the executable's worker
// subcommand (set -e: the first failing worker ends the task). Every value is quoted
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
	case strings.ContainsAny(a.Nodelist, " \t\n'\"\\$`"):
		return "", fmt.Errorf("slurm: node list %q: want a host name", a.Nodelist)
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
	if a.Nodelist != "" {
		w("#SBATCH --nodelist=%s", a.Nodelist)
	}
	w("set -euo pipefail")
	w("run_worker() {")
	w(`	echo "task ${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID} on $(hostname): worker $*"`)
	w("	%s worker \"$@\"", shellQuote(a.Exe))
	w("}")
	w(`case "${SLURM_ARRAY_TASK_ID:?not run as a job array task}" in`)
	for i, t := range a.Tasks {
		if len(t.Workers) == 0 {
			return "", fmt.Errorf("slurm: task %d runs no worker", i)
		}
		w("%d)", i)
		for _, tw := range t.Workers {
			flags := tw.TaskFlags(a.RunDir, a.Build)
			q := make([]string, len(flags))
			for k, f := range flags {
				q[k] = shellQuote(f)
			}
			w("	run_worker %s", strings.Join(q, " "))
		}
		w("	;;")
	}
	w(`*) echo "task $SLURM_ARRAY_TASK_ID: no such task in this array" >&2; exit 2 ;;`)
	w("esac")
	return b.String(), nil
}

// shellQuote quotes s for bash: single quotes, each ' as '\”.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
