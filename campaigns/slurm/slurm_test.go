package slurm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/campaigns"
)

func TestParseStates(t *testing.T) {
	type st = campaigns.TaskState
	for _, tc := range []struct {
		name string
		in   string
		want map[campaigns.TaskID]st
		err  string
	}{
		{name: "empty", in: "", want: map[campaigns.TaskID]st{}},
		{name: "squeue --array --states=all", in: "12_0|COMPLETED\n12_1|RUNNING\n12_2|PENDING\n12_3|CANCELLED\n",
			want: map[campaigns.TaskID]st{tid("12", 0): {State: "COMPLETED", Over: true}, tid("12", 1): {State: "RUNNING"},
				tid("12", 2): {State: "PENDING"}, tid("12", 3): {State: "CANCELLED", Over: true}}},
		{name: "collapsed pending range with a throttle", in: "7_[3-5,9%2]|PENDING\n",
			want: map[campaigns.TaskID]st{tid("7", 3): {State: "PENDING"}, tid("7", 4): {State: "PENDING"}, tid("7", 5): {State: "PENDING"}, tid("7", 9): {State: "PENDING"}}},
		{name: "sacct with reasons, exit codes and steps", in: "40_0|COMPLETED|0:0\n40_0.batch|COMPLETED|0:0\n40_1|CANCELLED by 0|0:15\n40_2|FAILED|1:0\n40_3|TIMEOUT|0:0\n",
			want: map[campaigns.TaskID]st{tid("40", 0): {State: "COMPLETED", Over: true, ExitCode: "0:0"}, tid("40", 1): {State: "CANCELLED", Over: true, ExitCode: "0:15"},
				tid("40", 2): {State: "FAILED", Over: true, ExitCode: "1:0"}, tid("40", 3): {State: "TIMEOUT", Over: true, ExitCode: "0:0"}}},
		{name: "a job that is not an array is skipped", in: "41|RUNNING\n41_0|NODE_FAIL\n",
			want: map[campaigns.TaskID]st{tid("41", 0): {State: "NODE_FAIL", Over: true}}},
		{name: "no state", in: "12_0\n", err: "want <job>_<task>|<state>"},
		{name: "bad job", in: "x_0|RUNNING\n", err: `job id "x"`},
		{name: "bad task", in: "12_a|RUNNING\n", err: `task "a" is not an index`},
		{name: "bad range", in: "12_[5-3]|PENDING\n", err: "task range"},
		{name: "open range", in: "12_[5-6|PENDING\n", err: "no closing bracket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseStates([]byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v\nwant %v", got, tc.want)
			}
		})
	}
}

func TestParseSubmit(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{in: "1234\n", want: "1234"},
		{in: "1234;cluster-a\n", want: "1234"},
		{in: "sbatch: warning: something\n99\n", want: "99"},
		{in: "Submitted batch job 5\n", err: "not a job id"},
		{in: "", err: "not a job id"},
	} {
		got, err := ParseSubmit([]byte(tc.in))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func testArray(device string) campaigns.Array {
	worker := func(cfg string, block int) campaigns.TaskWorker {
		return campaigns.TaskWorker{Key: "key-" + cfg, Args: campaigns.WorkerArgs{
			Campaign: "/shared/run/campaign.json", Contract: "/shared/run/contract.json", Config: cfg, Block: block,
			Artifact: "/shared/run/artifacts/a", Out: "/shared/run/raw/" + cfg + "/block-1.json"}}
	}
	return campaigns.Array{Name: "horizon-smoke-cpu", RunDir: "/shared/run", LogDir: "/shared/run/slurm/logs",
		Exe: "/shared/bin/horizon bench", Build: "abc", Device: device,
		Tasks: []campaigns.ArrayTask{
			{Workers: []campaigns.TaskWorker{worker("olmoe-c6", 1)}},
			{Workers: []campaigns.TaskWorker{worker("it's", 2), worker("it's", 3)}}, // hosts: mixed: a configuration's blocks
		}}
}

func TestScript(t *testing.T) {
	for _, tc := range []struct {
		name, device, nodelist string
		want, not              []string
	}{
		{name: "cpu: the whole node", device: "cpu", want: []string{"#SBATCH --exclusive"}, not: []string{"--gres"}},
		{name: "cuda: one GPU a task", device: "cuda", want: []string{"#SBATCH --gres=gpu:1"}, not: []string{"--exclusive", "--nodelist"}},
		{name: "pinned to a node", device: "cuda", nodelist: "gpu-node-7", want: []string{"#SBATCH --nodelist=gpu-node-7\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := testArray(tc.device)
			a.Nodelist = tc.nodelist
			s, err := Script(a, "1:30:00")
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range append(tc.want,
				"#!/bin/bash\n",
				"#SBATCH --job-name=horizon-smoke-cpu\n",
				"#SBATCH --array=0-1\n",
				"#SBATCH --output=/shared/run/slurm/logs/%A_%a.log\n",
				"#SBATCH --ntasks=1\n",
				"#SBATCH --time=1:30:00\n",
				"0)\n\trun_worker '--campaign' '/shared/run/campaign.json' '--contract' '/shared/run/contract.json' '--config' 'olmoe-c6' '--block' '1' '--artifact' '/shared/run/artifacts/a' '--out' '/shared/run/raw/olmoe-c6/block-1.json' '--run-dir' '/shared/run' '--journal-key' 'key-olmoe-c6' '--build' 'abc'\n\t;;\n",
				`'--config' 'it'\''s' '--block' '2'`,
				`'--config' 'it'\''s' '--block' '3'`,
				"\t'/shared/bin/horizon bench' worker \"$@\"\n",
			) {
				if !strings.Contains(s, want) {
					t.Errorf("script lacks %q:\n%s", want, s)
				}
			}
			for _, not := range tc.not {
				if strings.Contains(s, not) {
					t.Errorf("script has %q:\n%s", not, s)
				}
			}
		})
	}
	for _, tc := range []struct {
		name string
		edit func(*campaigns.Array)
		err  string
	}{
		{"no tasks", func(a *campaigns.Array) { a.Tasks = nil }, "no tasks"},
		{"relative executable", func(a *campaigns.Array) { a.Exe = "bin/horizon-bench" }, "absolute"},
		{"relative logs", func(a *campaigns.Array) { a.LogDir = "logs" }, "absolute"},
		{"no build", func(a *campaigns.Array) { a.Build = "" }, "no build"},
		{"name with a space", func(a *campaigns.Array) { a.Name = "a b" }, "job name"},
		{"percent in the log directory", func(a *campaigns.Array) { a.LogDir = "/x%y" }, "'%'"},
		{"a task without workers", func(a *campaigns.Array) { a.Tasks[1].Workers = nil }, "task 1 runs no worker"},
		{"a node list with a space", func(a *campaigns.Array) { a.Nodelist = "a b" }, "node list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := testArray("cpu")
			tc.edit(&a)
			if _, err := Script(a, "1:00:00"); err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("err %v, want one saying %q", err, tc.err)
			}
		})
	}
}

// The script is bash: it parses, and task 1 gets its worker's flags.
func TestScriptRunsInBash(t *testing.T) {
	a := testArray("cpu")
	a.Exe = "/bin/echo"
	s, err := Script(a, "1:00:00")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "s.sbatch")
	os.WriteFile(p, []byte(s), 0o755)
	cl := &Cluster{}
	out, err := cl.run(context.Background(), "env", "SLURM_ARRAY_TASK_ID=1", "SLURM_ARRAY_JOB_ID=9", "bash", p)
	if err != nil {
		t.Fatal(err)
	}
	for _, block := range []string{"2", "3"} {
		if !strings.Contains(string(out), "worker --campaign /shared/run/campaign.json --contract /shared/run/contract.json --config it's --block "+block) {
			t.Errorf("task 1 did not run block %s: %q", block, out)
		}
	}
	if strings.Contains(string(out), "olmoe-c6") {
		t.Errorf("task 1 ran task 0's worker: %q", out)
	}
	if _, err := cl.run(context.Background(), "env", "SLURM_ARRAY_TASK_ID=5", "bash", p); err == nil || !strings.Contains(err.Error(), "no such task") {
		t.Errorf("task 5 of 2: %v", err)
	}
}

// fakeCommands answers client commands from a table and records them.
type fakeCommands struct {
	calls   [][]string
	answers map[string]func(args []string) ([]byte, error)
}

func (f *fakeCommands) run(_ context.Context, name string, args ...string) ([]byte, error) {
	f.calls = append(f.calls, append([]string{name}, args...))
	if a := f.answers[name]; a != nil {
		return a(args)
	}
	return nil, errors.New(name + ": not faked")
}

func TestSubmit(t *testing.T) {
	a := testArray("cuda")
	a.LogDir = filepath.Join(t.TempDir(), "slurm", "logs")
	os.MkdirAll(a.LogDir, 0o755)
	var script string
	f := &fakeCommands{answers: map[string]func([]string) ([]byte, error){
		"sbatch": func(args []string) ([]byte, error) {
			b, err := os.ReadFile(args[len(args)-1])
			script = string(b)
			return []byte("77;c1\n"), err
		},
	}}
	cl := &Cluster{Args: []string{"--partition=gpu", "--time=4:00:00"}, Command: f.run}
	job, err := cl.Submit(context.Background(), a)
	if err != nil || job != "77" {
		t.Fatalf("job %q, %v", job, err)
	}
	args := f.calls[0]
	if args[0] != "sbatch" || args[1] != "--parsable" || args[2] != "--partition=gpu" || args[3] != "--time=4:00:00" ||
		filepath.Dir(args[4]) != filepath.Dir(a.LogDir) || !strings.HasSuffix(args[4], ".sbatch") {
		t.Errorf("sbatch called as %q: want --parsable, the user's arguments (which override the directives), then the script beside the logs", args)
	}
	if !strings.Contains(script, "#SBATCH --time="+DefaultTime+"\n") || !strings.Contains(script, "#SBATCH --gres=gpu:1\n") {
		t.Errorf("script:\n%s", script)
	}
}

func TestStates(t *testing.T) {
	for _, tc := range []struct {
		name          string
		squeue, sacct func([]string) ([]byte, error)
		want          map[campaigns.TaskID]campaigns.TaskState
		err           string
		noSacct       bool // sacct must not be asked
	}{
		{name: "squeue alone (no accounting)",
			squeue: func([]string) ([]byte, error) { return []byte("5_0|COMPLETED\n5_1|RUNNING\n"), nil },
			sacct:  func([]string) ([]byte, error) { return nil, errors.New("Slurm accounting storage is disabled") },
			want:   map[campaigns.TaskID]campaigns.TaskState{tid("5", 0): {State: "COMPLETED", Over: true}, tid("5", 1): {State: "RUNNING"}}},
		{name: "sacct for the job squeue forgot",
			squeue: func([]string) ([]byte, error) { return []byte("5_1|FAILED\n"), nil },
			sacct: func(args []string) ([]byte, error) {
				if args[len(args)-2] != "--jobs=6" {
					return nil, errors.New("sacct asked about " + args[len(args)-2])
				}
				return []byte("6_0|COMPLETED|0:0\n6_1|FAILED|3:0\n6_1.batch|FAILED|3:0\n"), nil
			},
			want: map[campaigns.TaskID]campaigns.TaskState{tid("5", 1): {State: "FAILED", Over: true},
				tid("6", 0): {State: "COMPLETED", Over: true, ExitCode: "0:0"}, tid("6", 1): {State: "FAILED", Over: true, ExitCode: "3:0"}}},
		{name: "sacct is not asked while squeue lists every job",
			squeue: func([]string) ([]byte, error) { return []byte("5_0|RUNNING\n6_0|PENDING\n"), nil },
			sacct:  func([]string) ([]byte, error) { return nil, errors.New("sacct asked") },
			want:   map[campaigns.TaskID]campaigns.TaskState{tid("5", 0): {State: "RUNNING"}, tid("6", 0): {State: "PENDING"}}, noSacct: true},
		{name: "a job the controller forgot",
			squeue: func([]string) ([]byte, error) {
				return nil, errors.New("squeue: exit status 1: slurm_load_jobs error: Invalid job id specified")
			},
			sacct: func([]string) ([]byte, error) { return nil, errors.New("disabled") },
			want:  map[campaigns.TaskID]campaigns.TaskState{}},
		{name: "squeue down is an error",
			squeue: func([]string) ([]byte, error) {
				return nil, errors.New("squeue: exit status 1: Unable to contact slurm controller")
			},
			err: "Unable to contact"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeCommands{answers: map[string]func([]string) ([]byte, error){"squeue": tc.squeue, "sacct": tc.sacct}}
			got, err := (&Cluster{Command: f.run}).States(context.Background(), []string{"5", "6"})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			if q := strings.Join(f.calls[0], " "); q != "squeue --noheader --array --states=all --jobs=5,6 --format=%i|%T" {
				t.Errorf("squeue called as %q", q)
			}
			if tc.noSacct && len(f.calls) != 1 {
				t.Errorf("client commands called: %q, want squeue alone", f.calls)
			}
		})
	}
}

func tid(job string, index int) campaigns.TaskID { return campaigns.TaskID{Job: job, Index: index} }
