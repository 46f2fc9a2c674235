package main

import (
	"fmt"
	"os"
	"os/exec"

	"golang.org/x/term"

	"github.com/horizon-runmap/horizon/campaigns"
)

// selfLauncher starts each worker as this very executable's worker
// subcommand (run and reproduce), and returns the executable's path.
func selfLauncher() (campaigns.WorkerLauncher, string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, "", fmt.Errorf("find this executable to start workers: %w", err)
	}
	return func(a campaigns.WorkerArgs) (*exec.Cmd, error) {
		return exec.Command(exe, append([]string{"worker"}, a.Flags()...)...), nil
	}, exe, nil
}

// stderrProgress is a progress bar on a terminal, log lines otherwise.
func stderrProgress() campaigns.Progress {
	if term.IsTerminal(int(os.Stderr.Fd())) {
		return campaigns.NewBar(os.Stderr)
	}
	return campaigns.NewLog(os.Stderr)
}
