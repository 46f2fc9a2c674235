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
	arrays []Array  // submitted, in order
	hold   bool     // run nothing: tasks stay PENDING
	fail   []string // "<config>/<block>" of workers whose task fails
}

func newFakeCluster() *fakeCluster {
	return &fakeCluster{tasks: map[TaskID]ArrayTask{}, states: map[TaskID]TaskState{}, next: 100}
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

// runTask runs one task to its end and returns its final state.
func (f *fakeCluster) runTask(id TaskID) TaskState {
	t := f.tasks[id]
	a := f.arrays[0]
	for _, x := range f.arrays {
		if len(x.Tasks) > id.Index && x.Tasks[id.Index].Key == t.Key {
			a = x
		}
	}
	log := TaskLog(a.LogDir, id.Job, id.Index)
	failed := func(err error) TaskState {
		os.WriteFile(log, []byte(err.Error()+"\n"), 0o644)
		return TaskState{State: "FAILED", Over: true, ExitCode: "1:0"}
	}
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
	return Run(ctx, RunOptions{Runtime: rt, Campaign: "testdata/mini.good.yml", Contract: miniContract, Out: out, RunDir: runDir,
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
		if !filepath.IsAbs(tk.Args.Out) || !filepath.IsAbs(tk.Args.Artifact) || !filepath.IsAbs(tk.Args.Campaign) {
			t.Errorf("task paths must be absolute: %+v", tk.Args)
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
	if a := fc.arrays[1].Tasks[0].Args; a.Config != "qwen2moe-tiny-c8" || a.Block != 1 {
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
