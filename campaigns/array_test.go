package campaigns_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/horizon-runmap/horizon/campaigns"
)

// fakeCluster is a one-node scheduler for the runner's job-array path: it
// runs one pending task per States call, as the worker subcommand does as
// an array task (the test worker, then JournalTask), so that the runner's
// submission, polling, adoption and failure handling run against tasks
// that really write and journal records.
type fakeCluster struct {
	mu     sync.Mutex
	next   int
	tasks  map[TaskID]ArrayTask
	order  []TaskID
	states map[TaskID]TaskState
	arrays []Array // submitted, in order
	byJob  map[string]Array
	hold   bool     // run nothing: tasks stay PENDING
	fail   []string // "<config>/<block>" of workers whose task fails
}

func newFakeCluster() *fakeCluster {
	return &fakeCluster{tasks: map[TaskID]ArrayTask{}, states: map[TaskID]TaskState{}, byJob: map[string]Array{}, next: 100}
}

func (f *fakeCluster) Name() string { return "fake" }

func (f *fakeCluster) Submit(_ context.Context, a Array) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	job := fmt.Sprint(f.next)
	for i, t := range a.Tasks {
		id := TaskID{Job: job, Index: i}
		f.tasks[id] = t
		f.order = append(f.order, id)
		f.states[id] = TaskState{State: "PENDING"}
	}
	f.arrays = append(f.arrays, a)
	f.byJob[job] = a
	return job, nil
}

func (f *fakeCluster) States(_ context.Context, jobs []string) (map[TaskID]TaskState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.hold {
		for _, id := range f.order {
			if f.states[id].State == "PENDING" {
				f.states[id] = f.runTask(id)
				break
			}
		}
	}
	out := map[TaskID]TaskState{}
	for id, st := range f.states {
		for _, j := range jobs {
			if id.Job == j {
				out[id] = st
			}
		}
	}
	return out, nil
}

// runTask runs one task's workers in turn, each as the worker subcommand
// does as an array task (the test worker, then JournalTask), and returns
// the task's final state: FAILED at its first failing worker.
func (f *fakeCluster) runTask(id TaskID) TaskState {
	a := f.byJob[id.Job]
	log := TaskLog(a.LogDir, id.Job, id.Index)
	failed := func(err error) TaskState {
		os.WriteFile(log, []byte(err.Error()+"\n"), 0o644)
		return TaskState{State: "FAILED", Over: true, ExitCode: "1:0"}
	}
	for _, t := range f.tasks[id].Workers {
		for _, w := range f.fail {
			if w == fmt.Sprintf("%s/%d", t.Args.Config, t.Args.Block) {
				return failed(errors.New("worker failing on purpose"))
			}
		}
		cmd, _ := testLauncher(t.Args)
		if out, err := cmd.CombinedOutput(); err != nil {
			return failed(fmt.Errorf("%v: %s", err, out))
		}
		c, k, _, err := LoadFrozen(t.Args.Campaign, t.Args.Contract)
		if err != nil {
			return failed(err)
		}
		cfg, _ := c.Config(t.Args.Config)
		if _, _, err := JournalTask(a.RunDir, t.Key, k, c, cfg, t.Args.Block); err != nil {
			return failed(err)
		}
	}
	os.WriteFile(log, []byte("journaled\n"), 0o644)
	return TaskState{State: "COMPLETED", Over: true, ExitCode: "0:0"}
}

// cancel marks a task cancelled, as scancel does.
func (f *fakeCluster) cancel(id TaskID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.states[id] = TaskState{State: "CANCELLED", Over: true}
}

func runMiniArray(ctx context.Context, t *testing.T, s Scheduler, out, runDir string) (RunResult, error) {
	t.Helper()
	return runArrayOf(ctx, t, "testdata/mini.good.yml", s, out, runDir)
}

func runArrayOf(ctx context.Context, t *testing.T, campaign string, s Scheduler, out, runDir string) (RunResult, error) {
	t.Helper()
	return Run(ctx, RunOptions{Runtime: rt, Campaign: campaign, Contract: miniContract, Out: out, RunDir: runDir,
		Launch: testLauncher, Progress: Quiet{}, Scheduler: s, Exe: "/bin/true", Build: "test-build", Poll: time.Millisecond})
}

func tasksOf(arrays []Array) []int {
	var n []int
	for _, a := range arrays {
		n = append(n, len(a.Tasks))
	}
	return n
}

// A campaign through the scheduler publishes the edition a local run does:
// same tokens, and an edition every check of checkEdition passes.
func TestArrayRun(t *testing.T) {
	dir := t.TempDir()
	fc := newFakeCluster()
	res, err := runMiniArray(context.Background(), t, fc, filepath.Join(dir, "array"), newRunDir(t))
	if err != nil {
		t.Fatal(err)
	}
	if res.Workers != 4 || res.Ran != 4 {
		t.Errorf("workers %d, ran %d; want 4 and 4", res.Workers, res.Ran)
	}
	if got := tasksOf(fc.arrays); len(got) != 1 || got[0] != 4 {
		t.Errorf("submitted arrays of %v tasks, want one of 4", got)
	}
	for _, tk := range fc.arrays[0].Tasks {
		if len(tk.Workers) != 1 {
			t.Fatalf("under hosts: uniform a task is one worker, got %d", len(tk.Workers))
		}
		if a := tk.Workers[0].Args; !filepath.IsAbs(a.Out) || !filepath.IsAbs(a.Artifact) || !filepath.IsAbs(a.Campaign) {
			t.Errorf("task paths must be absolute: %+v", a)
		}
	}
	checkEdition(t, filepath.Join(dir, "array"))
	if _, _, err := runMini(t, filepath.Join(dir, "local"), newRunDir(t), false, nil); err != nil {
		t.Fatal(err)
	}
	if err := SameTokens(filepath.Join(dir, "local"), filepath.Join(dir, "array")); err != nil {
		t.Error(err)
	}
}

// A submitter killed with its array pending, then one task cancelled: the
// same run again waits for the pending tasks (never submits them twice)
// and submits the cancelled one alone.
func TestArrayAdoptAfterKill(t *testing.T) {
	dir, runDir := t.TempDir(), newRunDir(t)
	fc := newFakeCluster()
	fc.hold = true
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := runMiniArray(ctx, t, fc, filepath.Join(dir, "e"), runDir)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "the array keeps running") {
		t.Fatalf("killed submitter: %v", err)
	}
	fc.cancel(fc.order[2])
	fc.hold = false
	res, err := runMiniArray(context.Background(), t, fc, filepath.Join(dir, "e"), runDir)
	if err != nil {
		t.Fatal(err)
	}
	if got := tasksOf(fc.arrays); len(got) != 2 || got[0] != 4 || got[1] != 1 {
		t.Errorf("submitted arrays of %v tasks, want 4 then 1 (the cancelled task only)", got)
	}
	if a := fc.arrays[1].Tasks[0].Workers[0].Args; a.Config != "qwen2moe-tiny-c8" || a.Block != 1 {
		t.Errorf("resubmitted %s block %d, want the cancelled task's worker qwen2moe-tiny-c8 block 1", a.Config, a.Block)
	}
	// The fake runs a task on each States call: the first one, asked
	// before the runner waits, finished task 0, which the runner then found
	// journaled (finished before, not run now).
	if res.Ran != 3 {
		t.Errorf("ran %d, want 3", res.Ran)
	}
	checkEdition(t, filepath.Join(dir, "e"))
	if _, err := os.Stat(filepath.Join(runDir, "slurm", "arrays.json")); !os.IsNotExist(err) {
		t.Errorf("arrays.json after publication: %v", err)
	}
}

// A failing task fails the run naming its log; the run again submits only
// the failed worker and publishes.
func TestArrayFailedTask(t *testing.T) {
	dir, runDir := t.TempDir(), newRunDir(t)
	fc := newFakeCluster()
	fc.fail = []string{"olmoe-tiny-c16/2"}
	_, err := runMiniArray(context.Background(), t, fc, filepath.Join(dir, "e"), runDir)
	if !errors.Is(err, ErrTasksFailed) {
		t.Fatalf("err %v, want ErrTasksFailed", err)
	}
	log := TaskLog(fc.arrays[0].LogDir, "101", 1)
	for _, want := range []string{"1 of 4 tasks", "olmoe-tiny-c16 block 2: task 101_1 FAILED exit 1:0", "log " + log} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if b, _ := os.ReadFile(log); !strings.Contains(string(b), "failing on purpose") {
		t.Errorf("log %s: %q", log, b)
	}
	fc.fail = nil
	res, err := runMiniArray(context.Background(), t, fc, filepath.Join(dir, "e"), runDir)
	if err != nil {
		t.Fatal(err)
	}
	if got := tasksOf(fc.arrays); len(got) != 2 || got[1] != 1 || res.Ran != 1 {
		t.Errorf("submitted %v tasks, ran %d now; want the failed one alone", got, res.Ran)
	}
	checkEdition(t, filepath.Join(dir, "e"))
}

// mixedMini is the mini campaign declaring hosts: mixed.
func mixedMini(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("testdata/mini.good.yml")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "mini-mixed.yml")
	if err := os.WriteFile(p, append(b, []byte("hosts: mixed\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Under hosts: mixed a configuration's blocks run as one task (one host);
// a configuration resubmitted after some of its blocks finished goes into
// an array pinned to the host they ran on.
func TestArrayMixedHosts(t *testing.T) {
	dir, runDir, camp := t.TempDir(), newRunDir(t), mixedMini(t)
	fc := newFakeCluster()
	fc.fail = []string{"qwen2moe-tiny-c8/2"}
	_, err := runArrayOf(context.Background(), t, camp, fc, filepath.Join(dir, "e"), runDir)
	if !errors.Is(err, ErrTasksFailed) {
		t.Fatalf("err %v, want ErrTasksFailed", err)
	}
	if a := fc.arrays[0]; len(a.Tasks) != 2 || len(a.Tasks[0].Workers) != 2 || len(a.Tasks[1].Workers) != 2 || a.Nodelist != "" {
		t.Fatalf("first array: %d tasks (%+v), want one per configuration holding its 2 blocks, on any node", len(a.Tasks), a)
	}
	for _, tk := range fc.arrays[0].Tasks {
		if tk.Workers[0].Args.Config != tk.Workers[1].Args.Config {
			t.Errorf("a task holds two configurations: %+v", tk.Workers)
		}
	}
	fc.fail = nil
	if _, err := runArrayOf(context.Background(), t, camp, fc, filepath.Join(dir, "e"), runDir); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if len(fc.arrays) != 2 {
		t.Fatalf("%d arrays submitted, want 2", len(fc.arrays))
	}
	if a := fc.arrays[1]; a.Nodelist != host || len(a.Tasks) != 1 || len(a.Tasks[0].Workers) != 1 || a.Tasks[0].Workers[0].Args.Block != 2 {
		t.Errorf("resubmission %+v: want qwen2moe-tiny-c8 block 2 alone, pinned to %s where its block 1 ran", a, host)
	}
	checkEdition(t, filepath.Join(dir, "e"))
}

// A local run refuses a run directory job arrays were submitted from.
func TestLocalRunRefusesArrays(t *testing.T) {
	dir, runDir := t.TempDir(), newRunDir(t)
	fc := newFakeCluster()
	fc.hold = true
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := runMiniArray(ctx, t, fc, filepath.Join(dir, "e"), runDir); err == nil {
		t.Fatal("a held array finished")
	}
	_, _, err := runMini(t, filepath.Join(dir, "e"), runDir, false, nil)
	if !errors.Is(err, ErrArraysInRunDir) || !strings.Contains(err.Error(), "--scheduler slurm") {
		t.Fatalf("local run over a run directory with arrays: %v", err)
	}
}
