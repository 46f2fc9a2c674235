package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// run --scheduler: bad combinations are one-line usage errors (exit 2)
// that write nothing; the real submission is make test-slurm's.
func TestRunSchedulerUsage(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	base := []string{"run", miniCampaign, "--contract", miniContract, "--run-dir", runDir, "--out", filepath.Join(dir, "e")}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown scheduler", []string{"--scheduler", "pbs"}, `--scheduler "pbs": want local or slurm`},
		{"slurm arguments without slurm", []string{"--slurm-args", "--partition=gpu"}, "--slurm-args applies to --scheduler slurm only"},
		{"slurm poll without slurm", []string{"--slurm-poll", "5s"}, "--slurm-poll applies to --scheduler slurm only"},
		{"quoted slurm arguments", []string{"--scheduler", "slurm", "--slurm-args", `--comment="a b"`}, "without quoting"},
		{"stop-after under slurm", []string{"--scheduler", "slurm", "--stop-after", "5m"}, "--stop-after does not apply to --scheduler slurm"},
		{"empty time limit", []string{"--scheduler", "slurm", "--slurm-time", ""}, "--slurm-time"},
		{"non-positive poll", []string{"--scheduler", "slurm", "--slurm-poll", "0s"}, "--slurm-poll 0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, append(base, tc.args...)...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
				t.Fatalf("exit %d, stderr %q; want %d, one line mentioning %q", r.code, r.stderr, exitUsage, tc.want)
			}
		})
	}
	onlyEntries(t, dir)
}

// A worker given part of the array task's flags refuses (exit 2).
func TestWorkerTaskFlagsTogether(t *testing.T) {
	r := run(t, "worker", "--campaign", "c", "--contract", "k", "--config", "x", "--block", "1", "--artifact", "a", "--out", "o",
		"--journal-key", "k1")
	if r.code != exitUsage || !strings.Contains(r.stderr, "--run-dir, --journal-key and --build go together") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}
