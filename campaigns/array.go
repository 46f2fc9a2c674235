package campaigns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/horizon-runmap/horizon/editions"
)

// A campaign on a cluster: the workers left run as the tasks of one job
// array (RunOptions.Scheduler; campaigns/slurm is the Slurm one) instead of
// one after another on this machine. Everything else is the local run's:
// the runner validates, freezes the campaign and contract into the run
// directory and prepares the artifacts there, then submits one task per
// worker left. Each task runs this executable's worker subcommand on some
// node of the cluster, writes its raw record into the run directory and
// journals it itself (JournalTask) under the journal lock, so a record is
// journaled even when nobody is waiting for it. The runner polls the
// scheduler, says a line per finished task, and once every task is over
// aggregates and publishes the edition as a local run does.
//
// The run directory must therefore be on a filesystem every node sees at
// the same path (NFS, Lustre, GPFS, with working flock), and so must the
// executable: the tasks run it by its absolute path and refuse to start
// when its SHA-256 is not the build the runner keyed their work with.
//
// Files the job arrays add to the run directory:
//
//	slurm/arrays.json          every array submitted for the run: job id and
//	                           its tasks (index, record path, work key)
//	slurm/logs/<job>_<i>.log   each task's standard output and error
//
// Killing the runner leaves the array running (nothing cancels it). The
// same command run again adopts it: tasks of an earlier array that the
// scheduler still has pending or running for the same work key are waited
// for, never submitted twice; finished records are kept; what is missing
// or failed is submitted again as a new array.

// Scheduler runs tasks as a job array on a cluster.
type Scheduler interface {
	// Name is the scheduler's name in messages ("slurm").
	Name() string
	// Submit submits the tasks as one job array, task i running
	// a.Tasks[i], and returns the array's job id.
	Submit(ctx context.Context, a Array) (string, error)
	// States reports the tasks of the given arrays the scheduler still
	// knows. A task it no longer knows is absent: it is over, and its
	// journal entry says whether it succeeded.
	States(ctx context.Context, jobs []string) (map[TaskID]TaskState, error)
}

// Array is one job array to submit.
type Array struct {
	Name   string // job name, "horizon-<edition>"
	RunDir string // absolute run directory
	LogDir string // absolute; task i of job J logs to TaskLog(LogDir, J, i)
	Exe    string // absolute path of the executable every task runs
	Build  string // its SHA-256: a task run by another executable refuses
	Device string // the campaign's device: cuda tasks ask for one GPU each, cpu tasks for their node
	// Nodelist, when set, pins the array's tasks to that host (hosts:
	// mixed: the rest of a configuration whose other blocks ran there).
	Nodelist string
	Tasks    []ArrayTask
}

// ArrayTask is one array task: the workers it runs one after another on
// its node and device. Under hosts: uniform a task is one worker; under
// hosts: mixed it is a configuration's workers left, so that they share a
// host.
type ArrayTask struct {
	Workers []TaskWorker
}

// TaskWorker is one worker of an array task: its worker arguments
// (absolute paths) and the work key it journals its record with.
type TaskWorker struct {
	Args WorkerArgs
	Key  string
}

// TaskFlags renders the worker subcommand's flags for an array task's
// worker: the worker's, without a progress pipe, and what makes it journal
// its own record (JournalTask) after checking that it runs build.
func (a TaskWorker) TaskFlags(runDir, build string) []string {
	f := []string{
		"--campaign", a.Args.Campaign, "--contract", a.Args.Contract, "--config", a.Args.Config,
		"--block", strconv.Itoa(a.Args.Block), "--artifact", a.Args.Artifact, "--out", a.Args.Out,
		"--run-dir", runDir, "--journal-key", a.Key, "--build", build,
	}
	if a.Args.Prefill != "" {
		f = append(f, "--prefill", a.Args.Prefill)
	}
	return f
}

// TaskID names one task of an array.
type TaskID struct {
	Job   string
	Index int
}

func (t TaskID) String() string { return t.Job + "_" + strconv.Itoa(t.Index) }

// TaskState is what the scheduler says of a task.
type TaskState struct {
	State    string // the scheduler's word: PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT...
	Over     bool   // the task ended (a final state)
	ExitCode string // "0:0", where the scheduler said
}

// TaskLog is the log of task index of job under logDir.
func TaskLog(logDir, job string, index int) string {
	return filepath.Join(logDir, job+"_"+strconv.Itoa(index)+".log")
}

// Files of a run directory's job arrays.
const (
	arraysDir  = "slurm"
	arraysFile = "slurm/arrays.json"
	logsDir    = "slurm/logs"
)

// arrayRecord is one submitted array as arrays.json keeps it.
type arrayRecord struct {
	Job       string       `json:"job"`
	Submitted time.Time    `json:"submitted"`
	Nodelist  string       `json:"nodelist,omitempty"`
	Tasks     []taskRecord `json:"tasks"` // a task's workers share its index
}

type taskRecord struct {
	Index int    `json:"index"`
	Path  string `json:"path"` // record, relative to the run directory
	Key   string `json:"key"`
}

type arraysDoc struct {
	Arrays []arrayRecord `json:"arrays"`
}

func readArrays(runDir string) (arraysDoc, error) {
	var d arraysDoc
	b, err := os.ReadFile(filepath.Join(runDir, arraysFile))
	if os.IsNotExist(err) {
		return d, nil
	} else if err != nil {
		return d, err
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return d, fmt.Errorf("%s: %w (remove it only once no task of its arrays is pending or running)", filepath.Join(runDir, arraysFile), err)
	}
	return d, nil
}

func writeArrays(runDir string, d arraysDoc) error {
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return err
	}
	return editions.WriteFileAtomic(filepath.Join(runDir, arraysFile), append(b, '\n'))
}

// tracked is a worker the runner waits for: the task that runs it.
type tracked struct {
	w  worker
	id TaskID
}

// adopt splits the workers left between those a task of an earlier array
// still runs (pending or running, for the same work key: wait for it) and
// those to submit (never submitted, or their task is over without a
// journaled record: it failed, was cancelled or timed out). A later array
// wins over an earlier one for the same record.
func adopt(todo []worker, arrays []arrayRecord, states map[TaskID]TaskState) (wait []tracked, submit []worker) {
	live := map[string]TaskID{} // by record path
	for _, a := range arrays {
		for _, t := range a.Tasks {
			id := TaskID{a.Job, t.Index}
			if st, ok := states[id]; ok && !st.Over {
				live[t.Path+"\x00"+t.Key] = id
			}
		}
	}
	for _, w := range todo {
		if id, ok := live[w.rel+"\x00"+w.key]; ok {
			wait = append(wait, tracked{w, id})
		} else {
			submit = append(submit, w)
		}
	}
	return wait, submit
}

// batch is one array to submit: its tasks, each the workers it runs in
// order, and the host it is pinned to ("" for any).
type batch struct {
	host  string
	tasks [][]worker
}

// batches groups the workers to submit into arrays. Under hosts: uniform
// (the default) one array holds one task per worker. Under hosts: mixed a
// configuration's workers run as one task, one after another on one host;
// a configuration some of whose records are already journaled goes into an
// array of its own pinned to the host they name, and one whose records name
// several hosts is an error (its edition could not verify). Weak spot: a
// configuration with blocks still pending or running in an earlier task
// (adopted) and others to submit is not pinned, since the adopted task's
// host is not known before its records are; the verifier then reports a
// split it causes.
func (rs *runState) batches(c *Campaign, plan, submit []worker) ([]batch, error) {
	if len(submit) == 0 {
		return nil, nil
	}
	if c.Hosts != HostsMixed {
		b := batch{}
		for _, w := range submit {
			b.tasks = append(b.tasks, []worker{w})
		}
		return []batch{b}, nil
	}
	left := map[string]bool{}
	for _, w := range submit {
		left[w.rel] = true
	}
	hostsOf := map[string][]string{} // configuration -> hosts of its journaled records
	for _, w := range plan {
		if left[w.rel] || !rs.j.finished(rs.runDir, w.key, w.rel) {
			continue
		}
		r, err := readRecord(filepath.Join(rs.runDir, w.rel))
		if err != nil {
			return nil, err
		}
		if !slices.Contains(hostsOf[w.cfg.ID], r.Environment.Hostname) {
			hostsOf[w.cfg.ID] = append(hostsOf[w.cfg.ID], r.Environment.Hostname)
		}
	}
	var free batch
	var pinned []batch
	var order []string
	byCfg := map[string][]worker{}
	for _, w := range submit {
		if _, ok := byCfg[w.cfg.ID]; !ok {
			order = append(order, w.cfg.ID)
		}
		byCfg[w.cfg.ID] = append(byCfg[w.cfg.ID], w)
	}
	for _, id := range order {
		switch hosts := hostsOf[id]; len(hosts) {
		case 0:
			free.tasks = append(free.tasks, byCfg[id])
		case 1:
			pinned = append(pinned, batch{host: hosts[0], tasks: [][]worker{byCfg[id]}})
		default:
			return nil, fmt.Errorf("configuration %s: its finished blocks ran on hosts %s, but the campaign declares hosts: mixed (each configuration on one host); delete its records under %s to run it again on one host",
				id, strings.Join(hosts, ", "), filepath.Join(rs.runDir, rawDir, id))
		}
	}
	if len(free.tasks) > 0 {
		pinned = append([]batch{free}, pinned...)
	}
	return pinned, nil
}

// jobsOf lists the job ids of arrays, oldest first.
func jobsOf(arrays []arrayRecord) []string {
	var jobs []string
	for _, a := range arrays {
		if !slices.Contains(jobs, a.Job) {
			jobs = append(jobs, a.Job)
		}
	}
	return jobs
}

// ErrArraysInRunDir is returned by a local run (no Scheduler) in a run
// directory that job arrays were submitted from: their tasks may still be
// writing its records.
var ErrArraysInRunDir = errors.New("run directory holds job arrays")

// ErrTasksFailed is wrapped by the error of a run whose array tasks did not
// all journal a record.
var ErrTasksFailed = errors.New("array tasks failed")

// taskFailure is a task that ended without a journaled record.
type taskFailure struct {
	t   tracked
	st  TaskState
	log string
	why string // the record's check failed, where it was there
}

func (f taskFailure) String() string {
	state := f.st.State
	if state == "" {
		state = "over (no longer known to the scheduler)"
	}
	if f.st.ExitCode != "" {
		state += " exit " + f.st.ExitCode
	}
	s := fmt.Sprintf("%s block %d: task %s %s, no journaled record", f.t.w.cfg.ID, f.t.w.block, f.t.id, state)
	if f.why != "" {
		s += " (" + f.why + ")"
	}
	return s + "; log " + f.log
}

// runArray runs the workers left as job array tasks (see the top of this
// file) and returns how many tasks journaled a record.
func (rs *runState) runArray(ctx context.Context, o RunOptions, prog Progress, c *Campaign, plan, todo []worker, check func(worker) error) (int, error) {
	s := o.Scheduler
	runDir, err := filepath.Abs(rs.runDir)
	if err != nil {
		return 0, err
	}
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		a, _ := filepath.Abs(p)
		return a
	}
	logDir := filepath.Join(runDir, filepath.FromSlash(logsDir))
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return 0, err
	}
	doc, err := readArrays(runDir)
	if err != nil {
		return 0, err
	}
	states := map[TaskID]TaskState{}
	if jobs := jobsOf(doc.Arrays); len(jobs) > 0 {
		if states, err = s.States(ctx, jobs); err != nil {
			return 0, fmt.Errorf("%s: states of the earlier arrays %s: %w", s.Name(), strings.Join(jobs, ", "), err)
		}
	}
	// A task may have journaled its record since the runner read the
	// journal: read it again after the states, so that a task over by now
	// is either journaled (done) or resubmitted, never both.
	j, err := openJournal(rs.runDir)
	if err != nil {
		return 0, err
	}
	rs.j = j
	var still []worker
	for _, w := range todo {
		if !j.finished(rs.runDir, w.key, w.rel) || check(w) != nil {
			still = append(still, w)
		}
	}
	todo = still
	wait, submit := adopt(todo, doc.Arrays, states)
	finished := len(plan) - len(todo)
	prog.Say(fmt.Sprintf("%d configurations, %d workers: %d finished before, %d still pending or running in an earlier array (adopted), %d to submit",
		len(c.Configurations), len(plan), finished, len(wait), len(submit)))
	batches, err := rs.batches(c, plan, submit)
	if err != nil {
		return 0, err
	}
	for _, b := range batches {
		a := Array{Name: "horizon-" + c.Edition, RunDir: runDir, LogDir: logDir, Exe: o.Exe, Build: o.Build,
			Device: c.Device, Nodelist: b.host}
		rec := arrayRecord{Nodelist: b.host}
		for i, ws := range b.tasks {
			var t ArrayTask
			for _, w := range ws {
				args := WorkerArgs{Campaign: abs(rs.campPath), Contract: abs(rs.contractPath), Config: w.cfg.ID, Block: w.block,
					Artifact: abs(rs.arts[w.cfg.ID]), Out: filepath.Join(runDir, w.rel)}
				t.Workers = append(t.Workers, TaskWorker{Args: args, Key: w.key})
				rec.Tasks = append(rec.Tasks, taskRecord{Index: i, Path: filepath.ToSlash(w.rel), Key: w.key})
			}
			a.Tasks = append(a.Tasks, t)
		}
		job, err := s.Submit(ctx, a)
		if err != nil {
			return 0, fmt.Errorf("%s: submit %d tasks: %w", s.Name(), len(a.Tasks), err)
		}
		rec.Job, rec.Submitted = job, time.Now().UTC()
		doc.Arrays = append(doc.Arrays, rec)
		if err := writeArrays(runDir, doc); err != nil {
			return 0, fmt.Errorf("record array %s (it was submitted; cancel it before running again, or keep it and restore %s): %w", job, arraysFile, err)
		}
		where := ""
		if b.host != "" {
			where = ", on " + b.host + " where the configuration's other blocks ran"
		}
		prog.Say(fmt.Sprintf("submitted job array %s (%s, %d tasks%s, logs %s/%s_<task>.log)", job, a.Name, len(a.Tasks), where, logDir, job))
		for i, ws := range b.tasks {
			for _, w := range ws {
				wait = append(wait, tracked{w, TaskID{job, i}})
			}
		}
	}
	return rs.waitArray(ctx, o, prog, wait, logDir, check)
}

// waitArray polls the scheduler until every tracked task is over, saying a
// line as each finishes, and returns how many journaled a record. A failed
// task is named with its log once all are over.
func (rs *runState) waitArray(ctx context.Context, o RunOptions, prog Progress, wait []tracked, logDir string, check func(worker) error) (int, error) {
	s := o.Scheduler
	poll := o.Poll
	if poll <= 0 {
		poll = 10 * time.Second
	}
	var jobs []string
	for _, t := range wait {
		if !slices.Contains(jobs, t.id.Job) {
			jobs = append(jobs, t.id.Job)
		}
	}
	left := slices.Clone(wait)
	var failed []taskFailure
	ok, total := 0, len(wait)
	start := time.Now()
	for len(left) > 0 {
		states, err := s.States(ctx, jobs)
		if err != nil {
			if ctx.Err() != nil {
				return ok, fmt.Errorf("interrupted (%w); the array keeps running: run the same command again to adopt it", ctx.Err())
			}
			return ok, fmt.Errorf("%s: task states: %w (the array keeps running: run the same command again to adopt it)", s.Name(), err)
		}
		j, err := openJournal(rs.runDir)
		if err != nil {
			return ok, err
		}
		rs.j = j
		var still []tracked
		for _, t := range left {
			// A worker is done once its record is journaled, even while its
			// task runs on (a hosts: mixed task runs a configuration's
			// blocks one after another).
			var why string
			if j.finished(rs.runDir, t.w.key, t.w.rel) {
				if err := check(t.w); err != nil {
					why = err.Error()
				} else {
					ok++
					prog.Say(fmt.Sprintf("task %s: %s block %d/%d done (%d/%d workers, %s)%s", t.id, t.w.cfg.ID, t.w.block, rs.units,
						ok+len(failed), total, short(time.Since(start)), hostOf(rs.runDir, t.w)))
					continue
				}
			}
			st, known := states[t.id]
			if known && !st.Over && why == "" {
				still = append(still, t)
				continue
			}
			log := TaskLog(logDir, t.id.Job, t.id.Index)
			f := taskFailure{t: t, st: st, log: log, why: why}
			failed = append(failed, f)
			prog.Say(fmt.Sprintf("task %s FAILED (%d/%d workers): %s", t.id, ok+len(failed), total, f))
		}
		left = still
		if len(left) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return ok, fmt.Errorf("interrupted (%w); the array keeps running (%d tasks left): run the same command again to adopt it", ctx.Err(), len(left))
		case <-time.After(poll):
		}
	}
	if len(failed) > 0 {
		msgs := make([]string, len(failed))
		for i, f := range failed {
			msgs[i] = f.String()
		}
		return ok, fmt.Errorf("%w: %d of %d tasks: %s (finished workers are kept; run the same command again to submit the failed ones)",
			ErrTasksFailed, len(failed), total, strings.Join(msgs, "; "))
	}
	return ok, nil
}

// hostOf names the host a finished record was made on, for the progress
// line (" on <host>"; "" when the record cannot be read).
func hostOf(runDir string, w worker) string {
	r, err := readRecord(filepath.Join(runDir, w.rel))
	if err != nil {
		return ""
	}
	return " on " + r.Environment.Hostname
}
