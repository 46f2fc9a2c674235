package main

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/horizon-runmap/horizon/campaigns"
	"github.com/horizon-runmap/horizon/editions"
	"github.com/horizon-runmap/horizon/schemas"
)

// The runner tests use the small test contract so that a whole campaign
// takes a second or two; the committed campaigns run PERF-REAL-v1.
const (
	miniCampaign = "../../campaigns/testdata/mini.good.yml"
	miniContract = "../../campaigns/testdata/mini-contract.yaml"
)

// checkEditions fails unless every visible entry of dir is a complete
// edition (its manifest lists exactly its files with their hashes, and the
// manifest validates) and every hidden one is a staging directory of the
// runner, which the next run removes.
func checkEditions(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return
	} else if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if strings.HasPrefix(e.Name(), ".") {
			if !strings.Contains(e.Name(), ".partial-") {
				t.Fatalf("unexpected hidden entry %s", p)
			}
			continue
		}
		b, err := os.ReadFile(filepath.Join(p, editions.ManifestFile))
		if err != nil {
			t.Fatalf("%s is not a complete edition: %v", p, err)
		}
		if err := schemas.Validate(b); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		var m editions.Manifest
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if err := editions.CheckManifest(p, m); err != nil {
			t.Fatalf("%s is not a complete edition: %v", p, err)
		}
	}
}

// TestRunSurvivesKill runs the mini campaign through the CLI, then kills
// the runner with SIGKILL at random points (in artifact preparation, in
// workers, while publishing) and checks after each kill that the editions
// directory holds no partial edition, and that a later run completes.
func TestRunSurvivesKill(t *testing.T) {
	tmp := t.TempDir()
	eds := filepath.Join(tmp, "editions")
	out := filepath.Join(eds, "mini-test")
	runDir := filepath.Join(tmp, "run")
	// Flags may follow the campaign file.
	args := []string{"run", miniCampaign, "--contract", miniContract, "--out", out, "--run-dir", runDir}
	r := run(t, args...)
	if r.code != 0 {
		t.Fatalf("first run: %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "edition mini-test written to "+out) {
		t.Errorf("stdout %q", r.stdout)
	}
	checkEditions(t, eds)
	// Not again without --force: usage error, edition untouched.
	before, _ := os.ReadFile(filepath.Join(out, editions.ManifestFile))
	r = run(t, args...)
	if r.code != exitUsage || !strings.Contains(r.stderr, "pass --force to replace it") {
		t.Fatalf("second run without --force: %d %s", r.code, r.stderr)
	}
	after, _ := os.ReadFile(filepath.Join(out, editions.ManifestFile))
	if string(before) != string(after) {
		t.Fatal("a refused run changed the edition")
	}
	// Time a run with the artifacts prepared: kills land inside it.
	args = append(args, "--force")
	start := time.Now()
	if r := run(t, args...); r.code != 0 {
		t.Fatalf("forced run: %d\n%s", r.code, r.stderr)
	}
	full := time.Since(start)
	checkEditions(t, eds)

	rng := rand.New(rand.NewPCG(4, 2))
	kills := 0
	for i := 0; kills < 6 && i < 12; i++ {
		limit := full * 9 / 10
		if i == 0 {
			// Kill one run during artifact preparation.
			os.RemoveAll(filepath.Join(runDir, "artifacts"))
			limit = time.Second
		}
		delay := time.Duration(rng.Int64N(int64(limit)))
		cmd := exec.Command(bin, args...)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-time.After(delay):
			cmd.Process.Signal(syscall.SIGKILL)
			<-done
			kills++
		case err := <-done:
			if err != nil {
				t.Fatalf("run %d failed by itself: %v\n%s", i, err, out.String())
			}
		}
		checkEditions(t, eds)
	}
	if kills < 5 {
		t.Fatalf("only %d runs were killed", kills)
	}
	if r := run(t, args...); r.code != 0 {
		t.Fatalf("run after the kills: %d\n%s", r.code, r.stderr)
	}
	checkEditions(t, eds)
	onlyEntries(t, eds, "mini-test")
	t.Logf("%d kills within %v runs", kills, full)
}

// TestRunStopAfter drives the run the way scripts/device-campaign.sh does:
// --stop-after 0s starts nothing and exits 75 with every worker pending;
// the same command with a time slot, repeated while it exits 75, completes
// the edition, whose tokens equal an uninterrupted run's. Both runs share
// one --artifact-cache.
func TestRunStopAfter(t *testing.T) {
	tmp := t.TempDir()
	eds, cache := filepath.Join(tmp, "editions"), filepath.Join(tmp, "cache")
	out, runDir := filepath.Join(eds, "sliced"), filepath.Join(tmp, "run-sliced")
	base := []string{"run", miniCampaign, "--contract", miniContract, "--out", out, "--run-dir", runDir, "--artifact-cache", cache}
	r := run(t, append(base, "--stop-after", "0s")...)
	if r.code != exitStopped || !strings.Contains(r.stderr, "4 of 4 workers remain") ||
		!strings.Contains(r.stderr, "run the same command again to resume") {
		t.Fatalf("--stop-after 0s: exit %d\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("a stopped run published %s", out)
	}
	calls := 0
	for r.code == exitStopped && calls < 30 {
		r = run(t, append(base, "--stop-after", "1s")...)
		calls++
	}
	if r.code != 0 {
		t.Fatalf("after %d calls with --stop-after 1s: exit %d\n%s", calls, r.code, r.stderr)
	}
	t.Logf("completed in %d calls of --stop-after 1s", calls)
	checkEditions(t, eds)
	whole := filepath.Join(eds, "whole")
	if r := run(t, "run", miniCampaign, "--contract", miniContract, "--out", whole, "--run-dir", filepath.Join(tmp, "run-whole"),
		"--artifact-cache", cache); r.code != 0 {
		t.Fatalf("uninterrupted run: %d\n%s", r.code, r.stderr)
	}
	if err := campaigns.SameTokens(out, whole); err != nil {
		t.Fatalf("the sliced edition's tokens differ from an uninterrupted run's: %v", err)
	}
	if r := run(t, append(base, "--stop-after", "-1s")...); r.code != exitUsage {
		t.Fatalf("negative --stop-after: exit %d", r.code)
	}
}

// TestRunPrepareOnly: --prepare-only readies the artifacts in a shared
// cache and stops (exit 0): no record, no edition, and a destination that
// a real run would refuse (a plain file) is left alone. A second call, and
// the real run in another run directory, reuse the artifacts instead of
// preparing them again; --stop-after 0s still stops it first (exit 75).
func TestRunPrepareOnly(t *testing.T) {
	tmp := t.TempDir()
	cache, out := filepath.Join(tmp, "cache"), filepath.Join(tmp, "not-an-edition")
	if err := os.WriteFile(out, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	prep := []string{"run", miniCampaign, "--contract", miniContract, "--out", out, "--run-dir", filepath.Join(tmp, "run-prep"),
		"--artifact-cache", cache, "--prepare-only"}
	for i, want := range []string{"preparing", "reused"} {
		r := run(t, prep...)
		if r.code != 0 || !strings.Contains(r.stdout, "artifacts of mini-test ready") ||
			!strings.Contains(r.stdout, filepath.Join(cache, "artifacts")) || !strings.Contains(r.stderr, want) {
			t.Fatalf("--prepare-only call %d: exit %d, want %q in stderr\nstdout %s\nstderr %s", i+1, r.code, want, r.stdout, r.stderr)
		}
	}
	if b, err := os.ReadFile(out); err != nil || string(b) != "keep me" {
		t.Fatalf("--prepare-only touched --out: %q %v", b, err)
	}
	if recs, _ := filepath.Glob(filepath.Join(tmp, "run-prep", "raw", "*", "*.json")); len(recs) != 0 {
		t.Fatalf("--prepare-only ran workers: %v", recs)
	}
	stopped := run(t, "run", miniCampaign, "--contract", miniContract, "--run-dir", filepath.Join(tmp, "run-stop"),
		"--artifact-cache", filepath.Join(tmp, "cache-stop"), "--prepare-only", "--stop-after", "0s")
	if stopped.code != exitStopped {
		t.Fatalf("--prepare-only --stop-after 0s: exit %d\n%s", stopped.code, stopped.stderr)
	}
	ed := filepath.Join(tmp, "editions", "mini")
	r := run(t, "run", miniCampaign, "--contract", miniContract, "--out", ed, "--run-dir", filepath.Join(tmp, "run-real"),
		"--artifact-cache", cache)
	if r.code != 0 || strings.Contains(r.stderr, "preparing") || !strings.Contains(r.stderr, "reused") {
		t.Fatalf("the real run after --prepare-only: exit %d (want the artifacts reused)\n%s", r.code, r.stderr)
	}
	checkEditions(t, filepath.Join(tmp, "editions"))
}

func TestRunBadInput(t *testing.T) {
	tmp := t.TempDir()
	// A bad campaign: one line, exit 2, nothing written.
	r := run(t, "run", "../../campaigns/testdata/capacity-above-experts.bad.yml", "--contract", miniContract,
		"--out", filepath.Join(tmp, "ed"), "--run-dir", filepath.Join(tmp, "run"))
	if r.code != exitUsage || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || !strings.Contains(r.stderr, "capacity 17 is above the 16 experts") {
		t.Fatalf("bad campaign: %d %q", r.code, r.stderr)
	}
	onlyEntries(t, tmp)
	// A cuda campaign in a build without CUDA: one line, exit 2, before any
	// artifact (a cuda worker would fail only after the checkpoint's
	// synthesis).
	if !buildCUDA {
		r := run(t, "run", "../../campaigns/smoke-cuda.yaml", "--out", filepath.Join(tmp, "ed"), "--run-dir", filepath.Join(tmp, "run"))
		if r.code != exitUsage || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || !strings.Contains(r.stderr, "built without CUDA support") {
			t.Fatalf("cuda campaign: %d %q", r.code, r.stderr)
		}
		onlyEntries(t, tmp)
	}
	if r := run(t, "run"); r.code != exitUsage {
		t.Fatalf("run without a campaign: %d", r.code)
	}
	if r := run(t, "run", miniCampaign, "extra"); r.code != exitUsage {
		t.Fatalf("run with two campaigns: %d", r.code)
	}
}
