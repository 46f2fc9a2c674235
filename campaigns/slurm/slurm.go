// Package slurm runs a campaign's workers as a Slurm job array: it
// provides campaigns.Scheduler through Slurm's client commands (sbatch,
// squeue, sacct), so it needs no Slurm library and works against any
// cluster whose commands are on PATH.
//
// The model: campaigns.Run hands Submit one campaigns.Array, the workers
// left. Submit writes an sbatch script into the run directory (Script:
// one array task per worker, a case on SLURM_ARRAY_TASK_ID choosing the
// worker's flags, the task exec-ing the campaign's executable as its worker
// subcommand) and submits it with `sbatch --parsable`, the user's own
// sbatch arguments last so that they override the script's directives.
// States asks squeue (every state the controller still holds, one line per
// array task) and, for the tasks squeue has forgotten, sacct where the
// cluster keeps accounting; a task neither knows is over, and the
// journal decides whether it succeeded.
//
// What a task asks for: one task, a time limit (Cluster.Time), the job's
// output as slurm/logs/<job>_<task>.log in the run directory, and the
// device: on cuda one GPU (--gres=gpu:1), never two workers on one GPU;
// on the cpu the whole node (--exclusive), since there the CPU is the
// measured device and a second worker would share its cores.
package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/horizon-runmap/horizon/campaigns"
)

// DefaultTime is a task's time limit unless Cluster.Time says otherwise.
const DefaultTime = "2:00:00"

// Cluster submits to the Slurm cluster whose client commands are on PATH
// (SLURM_CONF, when set, names its configuration).
type Cluster struct {
	// Args are extra sbatch arguments (--partition=gpu, --account=x,
	// --time=4:00:00, --constraint=h100...), given after the script's own
	// directives, which they override.
	Args []string
	// Time is each task's time limit (sbatch --time); "" is DefaultTime.
	Time string
	// Command runs one client command and returns its standard output
	// (nil: exec, with standard error in the error). Tests replace it.
	Command func(ctx context.Context, name string, args ...string) ([]byte, error)
}

var _ campaigns.Scheduler = (*Cluster)(nil)

// Name implements campaigns.Scheduler.
func (*Cluster) Name() string { return "slurm" }

func (cl *Cluster) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	if cl.Command != nil {
		return cl.Command(ctx, name, args...)
	}
	cmd := exec.CommandContext(ctx, name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.Error
		if errors.As(err, &ee) {
			return out, fmt.Errorf("%s: %w (is Slurm's client installed and on PATH?)", name, err)
		}
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return out, fmt.Errorf("%s: %w: %s", name, err, msg)
		}
		return out, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// Submit implements campaigns.Scheduler: it writes the array's script next
// to its logs and submits it.
func (cl *Cluster) Submit(ctx context.Context, a campaigns.Array) (string, error) {
	t := cl.Time
	if t == "" {
		t = DefaultTime
	}
	script, err := Script(a, t)
	if err != nil {
		return "", err
	}
	path := filepath.Join(filepath.Dir(a.LogDir), "submit-"+time.Now().UTC().Format("20060102T150405.000000000")+".sbatch")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		return "", fmt.Errorf("write the sbatch script: %w", err)
	}
	args := append([]string{"--parsable"}, cl.Args...)
	out, err := cl.run(ctx, "sbatch", append(args, path)...)
	if err != nil {
		return "", fmt.Errorf("submit %s: %w", path, err)
	}
	return ParseSubmit(out)
}

// ParseSubmit reads `sbatch --parsable`'s answer: "<job id>" or
// "<job id>;<cluster>".
func ParseSubmit(out []byte) (string, error) {
	s := strings.TrimSpace(string(out))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 { // warnings before it
		s = strings.TrimSpace(s[i+1:])
	}
	id, _, _ := strings.Cut(s, ";")
	if _, err := strconv.ParseUint(id, 10, 64); err != nil {
		return "", fmt.Errorf("sbatch --parsable answered %q, not a job id", strings.TrimSpace(string(out)))
	}
	return id, nil
}

// States implements campaigns.Scheduler: squeue for every task the
// controller holds, then sacct for the jobs it has forgotten, where
// accounting is kept.
func (cl *Cluster) States(ctx context.Context, jobs []string) (map[campaigns.TaskID]campaigns.TaskState, error) {
	list := strings.Join(jobs, ",")
	out, err := cl.run(ctx, "squeue", "--noheader", "--array", "--states=all", "--jobs="+list, "--format=%i|%T")
	if err != nil {
		// The controller forgets a job MinJobAge after it ended; squeue then
		// refuses the id. Accounting may still know it.
		if !strings.Contains(err.Error(), "Invalid job id") {
			return nil, err
		}
		out = nil
	}
	states, err := ParseStates(out)
	if err != nil {
		return nil, fmt.Errorf("squeue: %w", err)
	}
	// Jobs squeue no longer lists at all (ended longer than MinJobAge ago)
	// are asked of sacct, which fails without accounting storage; squeue's
	// answer stands then. sacct is not asked on every poll: only once a
	// job has left the controller.
	var gone []string
	for _, j := range jobs {
		listed := false
		for id := range states {
			listed = listed || id.Job == j
		}
		if !listed {
			gone = append(gone, j)
		}
	}
	if len(gone) == 0 {
		return states, nil
	}
	if acct, err := cl.run(ctx, "sacct", "--noheader", "--parsable2", "--allocations", "--jobs="+strings.Join(gone, ","), "--format=JobID,State,ExitCode"); err == nil {
		more, err := ParseStates(acct)
		if err != nil {
			return nil, fmt.Errorf("sacct: %w", err)
		}
		for id, st := range more {
			states[id] = st
		}
	}
	return states, nil
}

// overStates are Slurm's final job states: the task will not run (again)
// unless resubmitted.
var overStates = map[string]bool{
	"BOOT_FAIL": true, "CANCELLED": true, "COMPLETED": true, "DEADLINE": true, "FAILED": true,
	"NODE_FAIL": true, "OUT_OF_MEMORY": true, "PREEMPTED": true, "TIMEOUT": true, "REVOKED": true,
	"SPECIAL_EXIT": true,
}

// ParseStates reads lines of "<job>_<task>|<state>[|<exit code>]", as
// squeue --array --format=%i|%T and sacct --parsable2
// --format=JobID,State,ExitCode print them. A collapsed range of pending
// tasks ("12_[3-5,8%2]") stands for each of its tasks; lines of jobs that
// are not array tasks, and sacct's job steps, are skipped. A state with a
// reason ("CANCELLED by 0") is its first word.
func ParseStates(out []byte) (map[campaigns.TaskID]campaigns.TaskState, error) {
	states := map[campaigns.TaskID]campaigns.TaskState{}
	for n, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f := strings.Split(line, "|")
		if len(f) < 2 {
			return nil, fmt.Errorf("line %d %q: want <job>_<task>|<state>", n+1, line)
		}
		job, tasks, ok := strings.Cut(f[0], "_")
		if !ok || strings.Contains(tasks, ".") {
			continue // not an array task, or a job step
		}
		if _, err := strconv.ParseUint(job, 10, 64); err != nil {
			return nil, fmt.Errorf("line %d %q: job id %q", n+1, line, job)
		}
		word, _, _ := strings.Cut(strings.TrimSpace(f[1]), " ")
		st := campaigns.TaskState{State: word, Over: overStates[word]}
		if len(f) > 2 {
			st.ExitCode = strings.TrimSpace(f[2])
		}
		idx, err := taskIndices(tasks)
		if err != nil {
			return nil, fmt.Errorf("line %d %q: %w", n+1, line, err)
		}
		for _, i := range idx {
			states[campaigns.TaskID{Job: job, Index: i}] = st
		}
	}
	return states, nil
}

// taskIndices reads "7" or a collapsed range "[3-5,8%2]".
func taskIndices(s string) ([]int, error) {
	if !strings.HasPrefix(s, "[") {
		i, err := strconv.Atoi(s)
		if err != nil || i < 0 {
			return nil, fmt.Errorf("task %q is not an index", s)
		}
		return []int{i}, nil
	}
	body, ok := strings.CutSuffix(s[1:], "]")
	if !ok {
		return nil, fmt.Errorf("task range %q has no closing bracket", s)
	}
	body, _, _ = strings.Cut(body, "%") // the throttle
	var idx []int
	for _, part := range strings.Split(body, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("task range %q: %q", s, part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("task range %q: %q", s, part)
			}
		}
		for i := a; i <= b; i++ {
			idx = append(idx, i)
		}
	}
	return idx, nil
}
