package campaigns

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/horizon-runmap/horizon/campaigns/report"
	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
)

// Files of a run directory (runs/<edition>/ by default):
//
//	.lock                 held (flock) by the running runner
//	campaign.json         the frozen campaign the workers read
//	contract.json         the frozen contract the workers read
//	artifacts/<key>/      prepared artifacts, kept across runs (unless
//	                      RunOptions.ArtifactCache puts them elsewhere)
//	raw/<id>/block-<k>.json   finished workers' records
//	journal.jsonl         finished records with their SHA-256
const (
	lockFile = ".lock"
	rawDir   = "raw"
)

// WorkerArgs is what one worker process is told.
type WorkerArgs struct {
	Campaign string // the frozen campaign.json
	Contract string // the frozen contract.json
	Config   string // configuration id
	Block    int    // 1..blocks
	Artifact string // prepared artifact directory
	// Reference is a fidelity worker's reference arm's prepared artifact
	// directory ("" for every other worker; Config is then the pair's
	// treatment arm).
	Reference string
	Out       string // where the raw record goes
	// Prefill, when set, runs a configuration whose prefill is auto with
	// this prefill instead (PinPrefill): a reproduction reruns a worker with
	// the prefill its original record ran.
	Prefill string
}

// Flags renders the arguments as the worker subcommand's flags; the
// progress pipe is always file descriptor 3.
func (a WorkerArgs) Flags() []string {
	f := []string{
		"--campaign", a.Campaign, "--contract", a.Contract, "--config", a.Config,
		"--block", strconv.Itoa(a.Block), "--artifact", a.Artifact, "--out", a.Out, "--progress-fd", "3",
	}
	if a.Reference != "" {
		f = append(f, "--reference-artifact", a.Reference)
	}
	if a.Prefill != "" {
		f = append(f, "--prefill", a.Prefill)
	}
	return f
}

// WorkerLauncher returns the command that runs one worker process. The
// runner sets its standard streams, its progress pipe (fd 3) and its
// process attributes.
type WorkerLauncher func(WorkerArgs) (*exec.Cmd, error)

// RunOptions configure Run.
type RunOptions struct {
	Campaign string // campaign file
	Contract string // contract file; "" takes the built-in contract the campaign names
	Out      string // edition directory; "" means editions/<edition>
	RunDir   string // "" means runs/<edition>
	Force    bool   // replace an existing edition (atomically)
	Launch   WorkerLauncher
	// Runtime validates the campaign, prepares its artifacts and computes
	// the ceilings section (worker.Runtime); required.
	Runtime  Runtime
	Progress Progress // nil is quiet
	// Build identifies the program the workers run (the CLI passes the
	// SHA-256 of its executable). It is part of every work key, so a run
	// resumed with another build redoes the workers the old build finished
	// instead of mixing the two builds in one edition.
	Build string

	// ArtifactCache, when set, holds the prepared artifacts in
	// ArtifactCache/artifacts/<key>/ instead of <run dir>/artifacts/, so
	// that runs of several campaigns, each with its own run directory, share
	// them (the same checkpoint and expert format give the same key).
	// Preparing and verifying there is serialised by a lock on
	// ArtifactCache/artifacts.lock, one artifact at a time, so such runs may
	// start together; a run waiting for the lock still honours ShouldStop.
	ArtifactCache string
	// ShouldStop, when set, is asked before each artifact is prepared (or
	// verified) and before each worker starts. When it answers true, Run
	// starts nothing more and returns a *StoppedError: the worker that was
	// running has finished and is journaled, and running again resumes.
	// It never interrupts a worker or a preparation in flight (cancel ctx
	// for that). With every worker finished, Run publishes regardless.
	ShouldStop func() bool

	// Scheduler, when set, runs the workers left as the tasks of one job
	// array on a cluster (see array.go) instead of one after another here;
	// Exe is then the absolute path of the executable the tasks run (its
	// SHA-256 is Build), on a filesystem every node sees, and Poll how
	// often the scheduler is asked about the tasks (0: every 10 s). The
	// artifacts are prepared under the run directory's artifact lock
	// (ArtifactCache defaults to the run directory), which the tasks wait
	// on before they load one. ShouldStop is not asked once the array is
	// submitted.
	Scheduler Scheduler
	Exe       string
	Poll      time.Duration

	// PrepareOnly stops a run once every artifact is prepared (or
	// verified): no worker runs, nothing is published and the destination
	// is neither checked nor touched. The run returns a *PreparedError. It
	// is for preparing a campaign's artifacts into an ArtifactCache while
	// something else has the GPU; the real run, with its own run directory,
	// then verifies and reuses them.
	PrepareOnly bool
}

// RunResult summarises a finished run.
type RunResult struct {
	Edition string
	Dir     string // where the edition was published
	Workers int    // workers in the campaign
	Ran     int    // workers run now (the rest were finished before)
	Elapsed time.Duration
}

// ErrEditionExists is returned when the destination edition exists and
// Force is not set.
var ErrEditionExists = errors.New("edition exists")

// ErrStopped is wrapped by the *StoppedError Run returns when ShouldStop
// ended it with work left.
var ErrStopped = errors.New("stopped with work left")

// StoppedError says what a stopped run left to do. The run directory is
// resumable: running the campaign again with the same options continues.
type StoppedError struct {
	RunDir    string
	Workers   int // workers in the campaign
	Remaining int // workers without a journaled record
	// Artifacts is how many artifacts were not yet prepared or verified
	// when the run stopped (0 once workers had started).
	Artifacts int
}

func (e *StoppedError) Error() string {
	if e.Artifacts > 0 {
		return fmt.Sprintf("stopped before %d artifact(s) were prepared; %d of %d workers remain in %s",
			e.Artifacts, e.Remaining, e.Workers, e.RunDir)
	}
	return fmt.Sprintf("stopped; %d of %d workers remain in %s", e.Remaining, e.Workers, e.RunDir)
}

func (e *StoppedError) Unwrap() error { return ErrStopped }

// ErrPrepared is wrapped by the *PreparedError a run with
// RunOptions.PrepareOnly returns once its artifacts are ready.
var ErrPrepared = errors.New("artifacts prepared; no worker run")

// PreparedError says where a RunOptions.PrepareOnly run left the
// campaign's artifacts. It is the outcome that run asked for, not a
// failure.
type PreparedError struct {
	Edition   string
	Artifacts []string // the prepared artifact directories, sorted
}

func (e *PreparedError) Error() string {
	return fmt.Sprintf("%d artifact(s) of %s ready; no worker run", len(e.Artifacts), e.Edition)
}

func (e *PreparedError) Unwrap() error { return ErrPrepared }

// worker is one planned (configuration, block).
type worker struct {
	cfg *Configuration
	// ref is a fidelity worker's reference arm (cfg is its treatment);
	// nil otherwise.
	ref      *Configuration
	cfgIndex int
	block    int
	rel      string // record path relative to the run directory
	key      string
}

// Run runs a campaign end to end (see the package documentation). A
// campaign that fails validation returns before anything is written.
func Run(ctx context.Context, o RunOptions) (RunResult, error) {
	start := time.Now()
	prog := o.Progress
	if prog == nil {
		prog = quiet{}
	}
	if o.Runtime == nil {
		return RunResult{}, errors.New("campaigns: RunOptions.Runtime is nil (pass worker.Runtime{})")
	}
	c, k, _, err := Load(o.Campaign, o.Contract, o.Runtime)
	if err != nil {
		return RunResult{}, err
	}
	res := RunResult{Edition: c.Edition, Dir: o.Out}
	// Freeze the campaign and the contract: the workers read these.
	campDoc, err := c.Doc()
	if err != nil {
		return res, err
	}
	contractDoc, err := ContractDoc(k)
	if err != nil {
		return res, err
	}
	rs, err := setupRun(ctx, o, c, &res, campDoc, contractDoc, ReportTo(prog))
	if err != nil {
		return res, err
	}
	defer rs.unlock()
	runDir, j, artSHA := rs.runDir, rs.j, rs.artSHA
	if rs.left > 0 {
		res.Workers = len(c.Configurations) * k.Blocks
		done := 0
		for i := range c.Configurations {
			for b := 1; b <= k.Blocks; b++ {
				if j.recorded(runDir, filepath.FromSlash(editions.RawPath(c.Configurations[i].ID, b))) {
					done++
				}
			}
		}
		return res, &StoppedError{RunDir: runDir, Workers: res.Workers, Remaining: res.Workers - done, Artifacts: rs.left}
	}

	var plan, todo []worker
	for i := range c.Configurations {
		cfg := &c.Configurations[i]
		for b := 1; b <= k.Blocks; b++ {
			w := worker{cfg: cfg, cfgIndex: i, block: b, rel: filepath.FromSlash(editions.RawPath(cfg.ID, b))}
			if w.key, err = workKey(c, cfg, b, artSHA[cfg.ID], o.Build); err != nil {
				return res, err
			}
			plan = append(plan, w)
			if !j.finished(runDir, w.key, w.rel) || checkFinished(k, c, runDir, w) != nil {
				todo = append(todo, w)
			}
		}
	}
	res.Workers = len(plan)
	// Measured tokens only: each worker's warmup (k.Warmup) is excluded from
	// every metric, and the display counts it apart.
	// Under a prefill contract the display counts prompt tokens instead
	// (progressTokens).
	var todoTokens int64
	for _, w := range todo {
		todoTokens += progressTokens(k, o.Runtime, c, w.cfg)
	}
	startPrompts(prog, k)
	prog.Start(len(c.Configurations), len(plan), len(plan)-len(todo), todoTokens)
	check := func(w worker) error {
		rec, err := readRecord(filepath.Join(runDir, w.rel))
		if err != nil {
			return err
		}
		return CheckRecord(k, c, w.cfg, w.block, rec)
	}
	var ran int
	if o.Scheduler != nil {
		rs.units = k.Blocks
		ran, err = rs.runArray(ctx, o, prog, c, plan, todo, check)
		j = rs.j // the tasks journaled their records: the runner read the journal again
	} else {
		ran, err = rs.runTodo(ctx, o, prog, c, plan, todo, "block", k.Blocks, check)
	}
	res.Ran = ran
	if err != nil {
		return res, err
	}

	// Every record is in place and journaled: read them back (hash checked
	// once more) and build the edition.
	records := map[string][]*editions.RawRecord{}
	for _, w := range plan {
		if !j.finished(runDir, w.key, w.rel) {
			return res, fmt.Errorf("record %s changed after it was journaled; run again to redo it", w.rel)
		}
		rec, err := readRecord(filepath.Join(runDir, w.rel))
		if err != nil {
			return res, err
		}
		records[w.cfg.ID] = append(records[w.cfg.ID], rec)
	}
	prog.Say("aggregating and writing the edition")
	in := report.EditionInput{CampaignDoc: campDoc, ContractDoc: contractDoc, Records: records, RunDir: runDir, Ceilings: o.Runtime.CeilingsSection,
		HBMCeilings: o.Runtime.HBMCeilings}
	if err := publish(res.Dir, o.Force, func(dir string) error { return report.WriteEdition(dir, in) }); err != nil {
		return res, err
	}
	if err := clearRun(runDir); err != nil {
		return res, err
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// clearRun empties a run directory after publication: the edition holds
// the records now, and the run directory keeps only the prepared
// artifacts, so the next run measures afresh.
func clearRun(runDir string) error {
	for _, p := range []string{rawDir, journalFile, journalLock, arraysFile, editions.CampaignFile, editions.ContractFile} {
		if err := os.RemoveAll(filepath.Join(runDir, p)); err != nil {
			return err
		}
	}
	return nil
}

// runTodo runs the workers left, one at a time: each is started only while
// ShouldStop answers false, its record is checked (check) and journaled
// with its SHA-256. unit names a worker's unit in errors ("block",
// "shard"); units is how many a configuration has. It returns how many ran
// and a *StoppedError when ShouldStop stopped it.
func (rs *runState) runTodo(ctx context.Context, o RunOptions, prog Progress, c *Campaign, plan, todo []worker, unit string, units int, check func(worker) error) (int, error) {
	defer prog.Done()
	ran := 0
	for n, w := range todo {
		if o.ShouldStop != nil && o.ShouldStop() {
			return ran, &StoppedError{RunDir: rs.runDir, Workers: len(plan), Remaining: len(todo) - n}
		}
		prog.Worker(n+1, len(todo), w.cfgIndex+1, len(c.Configurations), w.cfg.ID, w.block, units)
		args := WorkerArgs{Campaign: rs.campPath, Contract: rs.contractPath, Config: w.cfg.ID, Block: w.block,
			Artifact: rs.arts[w.cfg.ID], Out: filepath.Join(rs.runDir, w.rel)}
		if w.ref != nil {
			args.Reference = rs.arts[w.ref.ID]
		}
		if err := runWorker(ctx, o.Launch, args, prog); err != nil {
			return ran, fmt.Errorf("worker %s %s %d: %w (finished workers are kept; run again to resume)", w.cfg.ID, unit, w.block, err)
		}
		if err := check(w); err != nil {
			return ran, err
		}
		sum, size, err := editions.HashFile(filepath.Join(rs.runDir, w.rel))
		if err != nil {
			return ran, err
		}
		if err := rs.j.add(journalEntry{Key: w.key, Path: w.rel, Bytes: size, SHA256: sum}); err != nil {
			return ran, err
		}
		ran++
	}
	return ran, nil
}

// runState is a run after setupRun: its directory locked (unlock releases
// it), the frozen campaign and contract written there for the workers, its
// journal open and its artifacts prepared (left: how many were not, when
// ShouldStop answered; artSHA is filled only when none is left).
type runState struct {
	runDir, campPath, contractPath string
	j                              *journal
	arts, artSHA                   map[string]string
	left                           int
	unlock                         func()
	units                          int // blocks of a configuration (job arrays' progress lines)
}

// setupRun does what every run does before its workers, for Run and
// RunIFEval alike: it checks the destination (res.Dir, defaulting to
// editions/<edition>), creates, locks and cleans the run directory
// (default runs/<edition>), writes the frozen documents, opens the journal
// and prepares the artifacts.
func setupRun(ctx context.Context, o RunOptions, c *Campaign, res *RunResult, campDoc editions.CampaignDoc, contractDoc editions.ContractDoc, rep Report) (*runState, error) {
	if res.Dir == "" {
		res.Dir = filepath.Join("editions", c.Edition)
	}
	if !o.PrepareOnly {
		if err := checkDestination(res.Dir, o.Force); err != nil {
			return nil, err
		}
	}
	rs := &runState{runDir: o.RunDir}
	if rs.runDir == "" {
		rs.runDir = filepath.Join("runs", c.Edition)
	}
	if err := os.MkdirAll(rs.runDir, 0o755); err != nil {
		return nil, err
	}
	unlock, err := lockRunDir(ctx, rs.runDir)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*runState, error) {
		unlock()
		return nil, err
	}
	// A local run would race the tasks of a job array still running in
	// this run directory (same records, same journal).
	if _, err := os.Stat(filepath.Join(rs.runDir, arraysFile)); err == nil && o.Scheduler == nil {
		return fail(fmt.Errorf("%w: run directory %s holds job arrays (%s) whose tasks may still run: run the campaign with --scheduler slurm to adopt them, or cancel them (scancel) and remove %s",
			ErrArraysInRunDir, rs.runDir, arraysFile, filepath.Join(rs.runDir, arraysDir)))
	}
	// Under a scheduler, tasks of an earlier array may still be writing
	// their records: only the destination's leftovers are removed here
	// (the artifacts' are, under the artifact lock, by prepareAll).
	cleanRoot := rs.runDir
	if o.Scheduler != nil {
		cleanRoot = ""
		if o.ArtifactCache == "" {
			o.ArtifactCache = rs.runDir
		}
	}
	dest := res.Dir
	if o.PrepareOnly {
		dest = ""
	}
	if err := cleanStale(cleanRoot, dest); err != nil {
		return fail(err)
	}
	rs.campPath, rs.contractPath = filepath.Join(rs.runDir, editions.CampaignFile), filepath.Join(rs.runDir, editions.ContractFile)
	if err := editions.WriteDoc(rs.campPath, campDoc); err != nil {
		return fail(err)
	}
	if err := editions.WriteDoc(rs.contractPath, contractDoc); err != nil {
		return fail(err)
	}
	if rs.j, err = openJournal(rs.runDir); err != nil {
		return fail(err)
	}
	if rs.arts, rs.left, err = prepareAll(ctx, o.Runtime, c, rs.runDir, o.ArtifactCache, o.ShouldStop, rep); err != nil {
		return fail(err)
	}
	if o.PrepareOnly && rs.left == 0 {
		unlock()
		dirs := slices.Sorted(maps.Values(rs.arts))
		return nil, &PreparedError{Edition: c.Edition, Artifacts: slices.Compact(dirs)}
	}
	rs.unlock = unlock
	if rs.left > 0 {
		return rs, nil
	}
	rs.artSHA = map[string]string{}
	for id, dir := range rs.arts {
		if rs.artSHA[id], err = o.Runtime.ArtifactSHA256(dir); err != nil {
			return fail(err)
		}
	}
	return rs, nil
}

// checkFinished re-checks a journaled record against the contract.
func checkFinished(k *contracts.Contract, c *Campaign, runDir string, w worker) error {
	rec, err := readRecord(filepath.Join(runDir, w.rel))
	if err != nil {
		return err
	}
	return CheckRecord(k, c, w.cfg, w.block, rec)
}

// readRecord reads a raw record strictly.
func readRecord(path string) (*editions.RawRecord, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r editions.RawRecord
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("raw record %s: %w", path, err)
	}
	return &r, nil
}

// runWorker runs one worker process to completion, forwarding its progress
// lines. The worker dies with the runner (PR_SET_PDEATHSIG), so a killed
// runner leaves no worker behind to race the next run.
func runWorker(ctx context.Context, launch WorkerLauncher, args WorkerArgs, prog Progress) error {
	if launch == nil {
		return errors.New("no worker launcher")
	}
	cmd, err := launch(args)
	if err != nil {
		return err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	defer pr.Close()
	stderr := &tailBuffer{max: 16 << 10}
	cmd.Stdout, cmd.Stderr = stderr, stderr
	cmd.ExtraFiles = []*os.File{pw}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}

	// Pdeathsig fires when the thread that forked the child exits, not the
	// process: keep this goroutine on one thread until the child is reaped.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cmd.Start(); err != nil {
		pw.Close()
		return fmt.Errorf("start worker: %w", err)
	}
	pw.Close()
	lines := make(chan struct{})
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			progressLine(prog, sc.Text())
		}
	}()
	stop := context.AfterFunc(ctx, func() { cmd.Process.Kill() })
	defer stop()
	werr := cmd.Wait()
	<-lines
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted: %w", ctx.Err())
	}
	if werr != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			return werr
		}
		return fmt.Errorf("%w: %s", werr, msg)
	}
	return nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.b) }

var _ io.Writer = (*tailBuffer)(nil)

// lockRunDir takes the run directory's lock, waiting a few seconds for a
// runner that is just dying.
func lockRunDir(ctx context.Context, runDir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(runDir, lockFile), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) || ctx.Err() != nil {
			f.Close()
			return nil, fmt.Errorf("run directory %s is in use by another horizon-bench run (%v)", runDir, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cleanStale removes what a killed run can leave behind: temporary files of
// atomic writes in the run directory, half-prepared artifacts, and
// half-assembled (or replaced) editions next to the destination.
func cleanStale(runDir, dest string) error {
	var stale []string
	if runDir != "" {
		var err error
		if stale, err = staleUnder(runDir); err != nil {
			return err
		}
	}
	if dest == "" {
		return removeAll(stale)
	}
	parent, base := filepath.Dir(dest), filepath.Base(dest)
	if ents, err := os.ReadDir(parent); err == nil {
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "."+base+stagingInfix) {
				stale = append(stale, filepath.Join(parent, e.Name()))
			}
		}
	}
	return removeAll(stale)
}

// staleUnder lists the temporary files and directories of atomic writes,
// half-prepared artifacts and synthetic checkpoints under root.
func staleUnder(root string) ([]string, error) {
	var stale []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if strings.Contains(name, ".tmp-") || strings.Contains(name, ".partial-") || strings.HasSuffix(name, ".checkpoint") {
			stale = append(stale, p)
			if d.IsDir() {
				return filepath.SkipDir
			}
		}
		return nil
	})
	if os.IsNotExist(err) {
		err = nil
	}
	return stale, err
}

func removeAll(stale []string) error {
	for _, p := range stale {
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("remove stale %s: %w", p, err)
		}
	}
	return nil
}

// artifactCacheLock is the lock file of a shared artifact cache
// (RunOptions.ArtifactCache).
const artifactCacheLock = "artifacts.lock"

// prepareAll prepares (or verifies) the campaign's artifacts one
// (checkpoint, expert format) at a time, under cache/artifacts when cache is
// set (holding its lock for each) or else under runDir/artifacts. Before
// each it asks stop; when stop says true it returns how many artifacts were
// left, and no directories. It says what it is about to do first (this can
// take minutes with nothing else on screen), and each artifact's lines
// carry its number, "[1/2] ", and so do its steps.
func prepareAll(ctx context.Context, rt Runtime, c *Campaign, runDir, cache string, stop func() bool, rep Report) (map[string]string, int, error) {
	say := rep.Say
	base := runDir
	if cache != "" {
		base = cache
	}
	var keys []string
	groups := map[string][]Configuration{}
	for i := range c.Configurations {
		key := c.ArtifactKey(&c.Configurations[i])
		if _, ok := groups[key]; !ok {
			keys = append(keys, key)
		}
		groups[key] = append(groups[key], c.Configurations[i])
	}
	say(fmt.Sprintf("artifacts of %s: %d to prepare under %s (synthesise and quantise, or verify and reuse one prepared before)…",
		c.Edition, len(keys), filepath.Join(base, ArtifactsDir)))
	dirs := map[string]string{}
	for i, key := range keys {
		if stop != nil && stop() {
			return nil, len(keys) - i, nil
		}
		prefix := fmt.Sprintf("[%d/%d] ", i+1, len(keys))
		say := func(msg string) { say(prefix + msg) }
		one := Report{Say: say}
		if rep.Step != nil {
			one.Step = func(what string) StepReport { return rep.Step(prefix + what) }
		}
		unlock := func() {}
		if cache != "" {
			var ok bool
			var err error
			if unlock, ok, err = lockArtifactCache(ctx, cache, stop, say); err != nil {
				return nil, 0, err
			} else if !ok {
				return nil, len(keys) - i, nil
			}
		}
		sub := *c
		sub.Configurations = groups[key]
		d, err := rt.PrepareArtifacts(ctx, &sub, base, one)
		unlock()
		if err != nil {
			return nil, 0, err
		}
		maps.Copy(dirs, d)
	}
	return dirs, 0, nil
}

// lockArtifactCache takes the exclusive lock of a shared artifact cache,
// waiting for as long as another run holds it (it prepares an artifact),
// and then removes what a killed preparation left there: nobody else is
// preparing while the lock is held. ok is false when stop said true (or
// ctx ended) while waiting.
func lockArtifactCache(ctx context.Context, cache string, stop func() bool, say func(string)) (unlock func(), ok bool, err error) {
	if err := os.MkdirAll(filepath.Join(cache, ArtifactsDir), 0o755); err != nil {
		return nil, false, err
	}
	f, err := os.OpenFile(filepath.Join(cache, artifactCacheLock), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, false, err
	}
	for waited := false; ; waited = true {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, false, fmt.Errorf("lock the artifact cache %s: %w", cache, err)
		}
		if !waited {
			say(fmt.Sprintf("artifact cache %s: another run is preparing an artifact; waiting", cache))
		}
		if ctx.Err() != nil {
			f.Close()
			return nil, false, ctx.Err()
		}
		if stop != nil && stop() {
			f.Close()
			return nil, false, nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	stale, err := staleUnder(filepath.Join(cache, ArtifactsDir))
	if err == nil {
		err = removeAll(stale)
	}
	if err != nil {
		f.Close()
		return nil, false, err
	}
	return func() { f.Close() }, true, nil
}

// measuredTokens is the tokens one worker of cfg measures: output tokens
// times the contract prompts its model's context holds (PromptsFor; all of
// them when the shape cannot be read, as validation would have said).
func measuredTokens(k *contracts.Contract, cat Catalog, c *Campaign, cfg *Configuration) int64 {
	positions := 0
	if m, err := cat.Shape(c, cfg); err == nil {
		positions = m.MaxPositions
	}
	return int64(len(k.PromptsFor(positions)) * k.OutputTokens)
}

// PinPrefill returns cfg with its prefill set to mode where cfg leaves it
// auto (a copy; cfg itself when mode is ""). A configuration that declares
// its prefill keeps it: pinning it to another is an error. A reproduction
// reruns each worker with the prefill its original record ran, so that a
// record made under an earlier auto rule (editions.RawVersionBatchedAuto)
// is rerun the same way, not under this build's rule.
func PinPrefill(cfg *Configuration, mode string) (*Configuration, error) {
	switch {
	case mode == "":
		return cfg, nil
	case mode != PrefillToken && mode != PrefillBatched:
		return nil, fmt.Errorf("prefill %q: want %s or %s", mode, PrefillToken, PrefillBatched)
	case cfg.Prefill != "" && cfg.Prefill != PrefillAuto && cfg.Prefill != mode:
		return nil, fmt.Errorf("configuration %s declares prefill %s; it cannot run %s", cfg.ID, cfg.Prefill, mode)
	case cfg.ExpertActivations == ExpertActFP16 && mode != PrefillBatched:
		return nil, fmt.Errorf("configuration %s declares expert_activations %s, which apply to a batched prefill; it cannot run prefill %s", cfg.ID, cfg.ExpertActivations, mode)
	case cfg.DenseActivations == DenseActFP16 && mode != PrefillBatched:
		return nil, fmt.Errorf("configuration %s declares dense_activations %s, which apply to a batched prefill; it cannot run prefill %s", cfg.ID, cfg.DenseActivations, mode)
	}
	c := *cfg
	c.Prefill = mode
	return &c, nil
}
