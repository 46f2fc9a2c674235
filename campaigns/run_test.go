package campaigns_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	. "github.com/horizon-runmap/horizon/campaigns"
	"github.com/horizon-runmap/horizon/campaigns/report"
	"github.com/horizon-runmap/horizon/campaigns/worker"
	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
	"github.com/horizon-runmap/horizon/runtime/cache"
	"github.com/horizon-runmap/horizon/runtime/cpu"
	"github.com/horizon-runmap/horizon/schemas"
)

// The test binary doubles as the worker process: Run re-executes it with
// workerEnv set, as the CLI re-executes itself.
const workerEnv = "HORIZON_CAMPAIGNS_TEST_WORKER"

func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) == "1" {
		if err := testWorker(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	if sharedArtifacts != "" {
		os.RemoveAll(sharedArtifacts)
	}
	os.Exit(code)
}

// sharedArtifacts holds the mini campaign's artifacts, prepared once and
// copied into each test's run directory.
var (
	sharedOnce      sync.Once
	sharedArtifacts string
	sharedErr       error
)

// newRunDir returns an empty run directory whose artifacts are already
// prepared.
func newRunDir(t *testing.T) string {
	t.Helper()
	sharedOnce.Do(func() {
		if sharedArtifacts, sharedErr = os.MkdirTemp("", "horizon-campaigns-test-"); sharedErr != nil {
			return
		}
		c, _, _, err := Load("testdata/mini.good.yml", miniContract, rt)
		if err != nil {
			sharedErr = err
			return
		}
		_, sharedErr = rt.PrepareArtifacts(context.Background(), c, sharedArtifacts, Report{Say: func(string) {}})
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	runDir := filepath.Join(t.TempDir(), "run")
	if err := os.CopyFS(runDir, os.DirFS(sharedArtifacts)); err != nil {
		t.Fatal(err)
	}
	return runDir
}

func testWorker(args []string) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	var a WorkerArgs
	var fd int
	fs.StringVar(&a.Campaign, "campaign", "", "")
	fs.StringVar(&a.Contract, "contract", "", "")
	fs.StringVar(&a.Config, "config", "", "")
	fs.IntVar(&a.Block, "block", 0, "")
	fs.StringVar(&a.Artifact, "artifact", "", "")
	fs.StringVar(&a.Out, "out", "", "")
	fs.StringVar(&a.Prefill, "prefill", "", "")
	fs.IntVar(&fd, "progress-fd", 0, "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, k, sha, err := LoadFrozen(a.Campaign, a.Contract)
	if err != nil {
		return err
	}
	cfg, ok := c.Config(a.Config)
	if !ok {
		return fmt.Errorf("no configuration %s", a.Config)
	}
	if cfg, err = PinPrefill(cfg, a.Prefill); err != nil {
		return err
	}
	be := cpu.New(c.Threads)
	rows := cache.NewCPUDevice(be)
	defer rows.Close()
	var progress io.Writer
	if fd > 0 {
		progress = os.NewFile(uintptr(fd), "progress")
	}
	return worker.Run(worker.Options{
		Contract: k, ContractSHA: sha, Campaign: c, Config: cfg, Block: a.Block, ArtifactDir: a.Artifact, Out: a.Out,
		Device: worker.Device{Name: "cpu", Backend: be, Rows: rows, Threads: max(c.Threads, 1)}, Started: worker.Started(), Progress: progress,
	})
}

func testLauncher(a WorkerArgs) (*exec.Cmd, error) {
	cmd := exec.Command(os.Args[0], a.Flags()...)
	cmd.Env = append(os.Environ(), workerEnv+"=1")
	return cmd, nil
}

// countingProgress counts what a run reports.
type countingProgress struct {
	Quiet
	workers int
	tokens  int64
}

func (p *countingProgress) Worker(int, int, int, int, string, int, int) { p.workers++ }
func (p *countingProgress) Tokens(n int64)                              { p.tokens += n }

func runMini(t *testing.T, out, runDir string, force bool, launch WorkerLauncher) (RunResult, *countingProgress, error) {
	t.Helper()
	if launch == nil {
		launch = testLauncher
	}
	p := &countingProgress{}
	res, err := Run(context.Background(), RunOptions{Runtime: rt,
		Campaign: "testdata/mini.good.yml", Contract: miniContract, Out: out, RunDir: runDir, Force: force,
		Launch: launch, Progress: p,
	})
	return res, p, err
}

// checkEdition verifies a published edition the way a reader would: the
// manifest lists exactly the files, every JSON document validates, every
// aggregate recomputes from the raw records and every claim from its source.
func checkEdition(t *testing.T, dir string) {
	t.Helper()
	var m editions.Manifest
	if err := ReadJSONStrict(filepath.Join(dir, editions.ManifestFile), &m); err != nil {
		t.Fatal(err)
	}
	if err := editions.CheckManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	for _, f := range append(m.Files, editions.FileEntry{Path: editions.ManifestFile}) {
		if filepath.Ext(f.Path) != ".json" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, f.Path))
		if err != nil {
			t.Fatal(err)
		}
		if err := schemas.Validate(b); err != nil {
			t.Errorf("%s: %v", f.Path, err)
		}
	}
	c, k, _, err := LoadFrozen(filepath.Join(dir, editions.CampaignFile), filepath.Join(dir, editions.ContractFile))
	if err != nil {
		t.Fatal(err)
	}
	var claims editions.ClaimsDoc
	if err := ReadJSONStrict(filepath.Join(dir, editions.ClaimsFile), &claims); err != nil {
		t.Fatal(err)
	}
	docs := map[string]any{}
	for i := range c.Configurations {
		cfg := &c.Configurations[i]
		var recs []*editions.RawRecord
		for b := 1; b <= k.Blocks; b++ {
			r, err := ReadRecord(filepath.Join(dir, editions.RawPath(cfg.ID, b)))
			if err != nil {
				t.Fatal(err)
			}
			if err := CheckRecord(k, c, cfg, b, r); err != nil {
				t.Error(err)
			}
			recs = append(recs, r)
		}
		want, err := report.Aggregate(reportView(t, c), k, &report.Configuration{ID: cfg.ID, SeedExecutor: cfg.SeedExecutor}, recs)
		if err != nil {
			t.Fatal(err)
		}
		wb, _ := json.Marshal(want)
		got, err := os.ReadFile(filepath.Join(dir, editions.ConfigPath(cfg.ID)))
		if err != nil {
			t.Fatal(err)
		}
		var gotDoc editions.ConfigDoc
		json.Unmarshal(got, &gotDoc)
		gb, _ := json.Marshal(gotDoc)
		if string(gb) != string(wb) {
			t.Errorf("%s does not recompute from its raw records", editions.ConfigPath(cfg.ID))
		}
		var generic any
		json.Unmarshal(got, &generic)
		docs[editions.ConfigPath(cfg.ID)] = generic
	}
	if len(claims.Claims) == 0 {
		t.Fatal("no claims")
	}
	for _, cl := range claims.Claims {
		v, err := Lookup(docs[cl.Source.File], cl.Source.Pointer)
		if err != nil {
			t.Fatalf("claim %s: %v", cl.ID, err)
		}
		if f, _ := v.(float64); f != cl.Source.Value || report.Round(f, cl.Decimals) != cl.Value {
			t.Errorf("claim %s: value %v, source %v (%v)", cl.ID, cl.Value, cl.Source.Value, v)
		}
	}
}

func TestRunPublishesAndReproduces(t *testing.T) {
	tmp := t.TempDir()
	runDir := newRunDir(t)
	a, b := filepath.Join(tmp, "editions", "a"), filepath.Join(tmp, "editions", "b")
	res, p, err := runMini(t, a, runDir, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Workers != 4 || res.Ran != 4 || p.workers != 4 || p.tokens != 4*(2+3*4) {
		t.Fatalf("ran %d of %d workers, progress saw %d workers and %d tokens", res.Ran, res.Workers, p.workers, p.tokens)
	}
	checkEdition(t, a)
	// The run directory keeps only the prepared artifacts.
	ents, _ := os.ReadDir(runDir)
	for _, e := range ents {
		if e.Name() != ArtifactsDir && e.Name() != LockFile {
			t.Errorf("run directory still holds %s", e.Name())
		}
	}
	// A second run measures afresh and produces the same tokens.
	if _, _, err := runMini(t, b, runDir, false, nil); err != nil {
		t.Fatal(err)
	}
	same := SameTokens
	if id, err := FrozenContractID(filepath.Join(a, editions.ContractFile)); err == nil && contracts.IsIFEval(id) {
		same = SameIFEvalResponses
	} else if err == nil && contracts.IsFidelity(id) {
		same = SameFidelityResponses
	}
	if err := same(a, b); err != nil {
		t.Fatal(err)
	}
	ra, _ := ReadRecord(filepath.Join(a, editions.RawPath("olmoe-tiny-c16", 1)))
	rb, _ := ReadRecord(filepath.Join(b, editions.RawPath("olmoe-tiny-c16", 1)))
	if ra.StartedAt == rb.StartedAt {
		t.Error("the second run reused the first run's records")
	}
	// An existing edition is kept unless forced.
	before, _ := os.ReadFile(filepath.Join(a, editions.ManifestFile))
	if _, _, err := runMini(t, a, runDir, false, nil); !errors.Is(err, ErrEditionExists) {
		t.Fatalf("run over an existing edition: %v, want ErrEditionExists", err)
	}
	after, _ := os.ReadFile(filepath.Join(a, editions.ManifestFile))
	if string(before) != string(after) {
		t.Fatal("a refused run changed the edition")
	}
	if _, _, err := runMini(t, a, runDir, true, nil); err != nil {
		t.Fatal(err)
	}
	checkEdition(t, a)
	ents, _ = os.ReadDir(filepath.Dir(a))
	if len(ents) != 2 {
		t.Errorf("editions directory holds %d entries after --force, want a and b only", len(ents))
	}
}

// A failed worker leaves the finished ones journaled; the next run redoes
// only the rest, and redoes a record whose bytes changed.
func TestRunResumes(t *testing.T) {
	tmp := t.TempDir()
	runDir, out := newRunDir(t), filepath.Join(tmp, "editions", "mini")
	n := 0
	failThird := func(a WorkerArgs) (*exec.Cmd, error) {
		n++
		if n == 3 {
			return exec.Command("false"), nil
		}
		return testLauncher(a)
	}
	if _, _, err := runMini(t, out, runDir, false, failThird); err == nil {
		t.Fatal("a failing worker did not fail the run")
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("a failed run published %s", out)
	}
	// Tamper with a finished record: it must be redone.
	rec := filepath.Join(runDir, editions.RawPath("olmoe-tiny-c16", 2))
	b, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(rec, append(b, ' '), 0o644)
	res, _, err := runMini(t, out, runDir, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Ran != 3 {
		t.Fatalf("resumed run ran %d workers, want 3 (one tampered + two never run)", res.Ran)
	}
	checkEdition(t, out)
}

// ShouldStop ends a run between workers with the run directory resumable:
// a stop before anything leaves every worker pending, a stop after one
// worker lets that worker finish and journals it, and running again
// completes an edition whose tokens equal an uninterrupted run's.
func TestRunStopsAndResumes(t *testing.T) {
	tmp := t.TempDir()
	runDir, out := newRunDir(t), filepath.Join(tmp, "editions", "mini")
	run := func(stop func() bool, launch WorkerLauncher) (RunResult, error) {
		if launch == nil {
			launch = testLauncher
		}
		return Run(context.Background(), RunOptions{Runtime: rt,
			Campaign: "testdata/mini.good.yml", Contract: miniContract, Out: out, RunDir: runDir,
			Launch: launch, ShouldStop: stop,
		})
	}
	var stopped *StoppedError
	// A deadline that has passed already: nothing is prepared or run.
	res, err := run(func() bool { return true }, nil)
	if !errors.As(err, &stopped) || !errors.Is(err, ErrStopped) {
		t.Fatalf("stop at once: %v, want a *StoppedError", err)
	}
	if res.Ran != 0 || stopped.Workers != 4 || stopped.Remaining != 4 || stopped.Artifacts != 2 || stopped.RunDir != runDir {
		t.Fatalf("stop at once: ran %d, %+v", res.Ran, *stopped)
	}
	// Stop once the first worker has been launched: it still finishes.
	launched := 0
	counting := func(a WorkerArgs) (*exec.Cmd, error) {
		launched++
		return testLauncher(a)
	}
	res, err = run(func() bool { return launched >= 1 }, counting)
	if !errors.As(err, &stopped) {
		t.Fatalf("stop after one worker: %v, want a *StoppedError", err)
	}
	if res.Ran != 1 || stopped.Remaining != 3 || stopped.Artifacts != 0 {
		t.Fatalf("stop after one worker: ran %d, %+v", res.Ran, *stopped)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("a stopped run published %s", out)
	}
	// A stop counted from the artifacts on: the finished worker stays
	// journaled and is not redone.
	launched = 0
	res, err = run(func() bool { return launched >= 1 }, counting)
	if !errors.As(err, &stopped) || res.Ran != 1 || stopped.Remaining != 2 {
		t.Fatalf("second stopped run: ran %d, %v", res.Ran, err)
	}
	// Resume to the end. The stop turns true once the last worker is
	// launched: with nothing left to start, the edition is published.
	launched = 0
	res, err = run(func() bool { return launched >= 2 }, counting)
	if err != nil {
		t.Fatal(err)
	}
	if res.Ran != 2 || res.Workers != 4 {
		t.Fatalf("resumed run ran %d of %d workers, want 2 of 4", res.Ran, res.Workers)
	}
	checkEdition(t, out)
	// The same tokens as a run that was never stopped.
	out2 := filepath.Join(tmp, "editions", "whole")
	if _, _, err := runMini(t, out2, newRunDir(t), false, nil); err != nil {
		t.Fatal(err)
	}
	if err := SameTokens(out, out2); err != nil {
		t.Fatalf("the resumed edition's tokens differ from an uninterrupted run's: %v", err)
	}
}

// A run resumed by another build redoes the workers the first build
// finished: one edition never mixes builds.
func TestRunRedoesOtherBuild(t *testing.T) {
	runDir, out := newRunDir(t), filepath.Join(t.TempDir(), "editions", "mini")
	launched := 0
	counting := func(a WorkerArgs) (*exec.Cmd, error) {
		launched++
		return testLauncher(a)
	}
	opts := RunOptions{Runtime: rt, Campaign: "testdata/mini.good.yml", Contract: miniContract, Out: out, RunDir: runDir,
		Launch: counting, Build: "build-a", ShouldStop: func() bool { return launched >= 1 }}
	if res, err := Run(context.Background(), opts); !errors.Is(err, ErrStopped) || res.Ran != 1 {
		t.Fatalf("first build: ran %d, %v", res.Ran, err)
	}
	opts.Build, opts.ShouldStop = "build-b", nil
	res, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Ran != 4 {
		t.Fatalf("the second build ran %d workers, want all 4", res.Ran)
	}
}

// Two runs of the campaign with their own run directories and one
// artifact cache, started together on an empty cache: they take turns
// preparing, each artifact is prepared once, the run directories hold no
// artifacts, and both editions have the same tokens.
func TestRunSharedArtifactCache(t *testing.T) {
	tmp := t.TempDir()
	cache := filepath.Join(tmp, "cache")
	var wg sync.WaitGroup
	errs := make([]error, 2)
	outs := []string{filepath.Join(tmp, "editions", "a"), filepath.Join(tmp, "editions", "b")}
	runDirs := []string{filepath.Join(tmp, "run-a"), filepath.Join(tmp, "run-b")}
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = Run(context.Background(), RunOptions{Runtime: rt,
				Campaign: "testdata/mini.good.yml", Contract: miniContract, Out: outs[i], RunDir: runDirs[i],
				Launch: testLauncher, ArtifactCache: cache,
			})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	ents, err := os.ReadDir(filepath.Join(cache, ArtifactsDir))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(names) != 2 {
		t.Fatalf("the cache holds %v, want the two artifacts only", names)
	}
	for _, d := range runDirs {
		if _, err := os.Stat(filepath.Join(d, ArtifactsDir)); !os.IsNotExist(err) {
			t.Errorf("%s has its own artifacts", d)
		}
	}
	if err := SameTokens(outs[0], outs[1]); err != nil {
		t.Fatal(err)
	}
}

// A bad campaign writes nothing at all.
func TestBadCampaignWritesNothing(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.bad.yml")
	for _, f := range files {
		tmp := t.TempDir()
		out, runDir := filepath.Join(tmp, "editions", "x"), filepath.Join(tmp, "run")
		_, err := Run(context.Background(), RunOptions{Runtime: rt, Campaign: f, Contract: miniContract, Out: out, RunDir: runDir, Launch: testLauncher})
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", f, err)
		}
		if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
			t.Errorf("%s: the run wrote %v", f, ents)
		}
	}
}

// TestEditionTokensMatch compares the token ids of two editions named by
// HORIZON_EDITION_A and HORIZON_EDITION_B (make edition-smoke-check).
func TestEditionTokensMatch(t *testing.T) {
	a, b := os.Getenv("HORIZON_EDITION_A"), os.Getenv("HORIZON_EDITION_B")
	if a == "" || b == "" {
		t.Skip("set HORIZON_EDITION_A and HORIZON_EDITION_B to compare two editions")
	}
	same := SameTokens
	if id, err := FrozenContractID(filepath.Join(a, editions.ContractFile)); err == nil && contracts.IsIFEval(id) {
		same = SameIFEvalResponses
	} else if err == nil && contracts.IsFidelity(id) {
		same = SameFidelityResponses
	}
	if err := same(a, b); err != nil {
		t.Fatal(err)
	}
}

// rt is this build's runtime side, as the CLI passes it.
var rt = worker.Runtime{}

// reportView is the report side's view of a campaign, read from its frozen
// document as the runner hands it over.
func reportView(t *testing.T, c *Campaign) *report.Campaign {
	t.Helper()
	doc, err := c.Doc()
	if err != nil {
		t.Fatal(err)
	}
	v, err := report.CampaignFromDoc(doc)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
