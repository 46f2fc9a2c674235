package campaigns_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	. "github.com/horizon-runmap/horizon/campaigns"
	"github.com/horizon-runmap/horizon/campaigns/worker"
	"github.com/horizon-runmap/horizon/editions"
	"github.com/horizon-runmap/horizon/runtime/cache"
	"github.com/horizon-runmap/horizon/runtime/cpu"
	"github.com/horizon-runmap/horizon/schemas"
)

// A configuration's transport reaches the cache and the raw record: the
// registered twin of a staged configuration records transport registered,
// no staging ring and its registration time, validates against the raw
// schema and the contract, moves the same H2D bytes and produces the same
// tokens.
func TestWorkerTransport(t *testing.T) {
	const src = `edition: transport-test
contract: {id: PERF-MINI-TEST, sha256: 3051d7dc6ce232a1f017cdde56f7f9e90fff6afd11a63d11ab5dfea94df02d0d}
device: cpu
threads: 1
configurations:
  - id: olmoe-tiny-c8
    checkpoint: {synthetic: {arch: olmoe-tiny, seed: 1}}
    capacity: 8
    executor: grouped-v1
  - id: olmoe-tiny-c8-registered
    checkpoint: {synthetic: {arch: olmoe-tiny, seed: 1}}
    capacity: 8
    executor: grouped-v1
    transport: registered
`
	dir := t.TempDir()
	path := filepath.Join(dir, "transport.yml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	c, k, sha, err := Load(path, miniContract, rt)
	if err != nil {
		t.Fatal(err)
	}
	arts, err := rt.PrepareArtifacts(context.Background(), c, filepath.Join(dir, "run"), Report{Say: func(string) {}})
	if err != nil {
		t.Fatal(err)
	}
	recs := map[string]*editions.RawRecord{}
	for i := range c.Configurations {
		cfg := &c.Configurations[i]
		be := cpu.New(1)
		rows := cache.NewCPUDevice(be)
		out := filepath.Join(dir, cfg.ID+".json")
		err := worker.Run(worker.Options{
			Contract: k, ContractSHA: sha, Campaign: c, Config: cfg, Block: 1, ArtifactDir: arts[cfg.ID], Out: out,
			Device: worker.Device{Name: "cpu", Backend: be, Rows: rows, Threads: 1},
		})
		rows.Close()
		if err != nil {
			t.Fatalf("%s: %v", cfg.ID, err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if err := schemas.Validate(b); err != nil {
			t.Fatalf("%s: %v", cfg.ID, err)
		}
		if recs[cfg.ID], err = ReadRecord(out); err != nil {
			t.Fatal(err)
		}
	}
	staged, reg := recs["olmoe-tiny-c8"], recs["olmoe-tiny-c8-registered"]
	if s := staged.Setup; s.Transport != cache.TransportStaged || s.Staging == 0 || staged.Preparation.HostRegisterSeconds != nil {
		t.Errorf("staged record: setup %+v, host_register_seconds %v", s, staged.Preparation.HostRegisterSeconds)
	}
	if s := reg.Setup; s.Transport != cache.TransportRegistered || s.Staging != 0 || reg.Preparation.HostRegisterSeconds == nil {
		t.Errorf("registered record: setup %+v, host_register_seconds %v", s, reg.Preparation.HostRegisterSeconds)
	}
	if staged.Preparation.H2DBytes != reg.Preparation.H2DBytes {
		t.Errorf("initial placement moved %d bytes staged, %d registered", staged.Preparation.H2DBytes, reg.Preparation.H2DBytes)
	}
	var misses int64
	for i, r := range reg.Requests {
		s := staged.Requests[i]
		if !slices.Equal(r.TokenIDs, s.TokenIDs) {
			t.Errorf("request %d: registered tokens %v, staged %v", i, r.TokenIDs, s.TokenIDs)
		}
		if r.Cache.H2DBytes != s.Cache.H2DBytes || r.Cache.Misses != s.Cache.Misses || r.Cache.H2DBytes != r.Cache.Misses*reg.Artifact.RecordBytes {
			t.Errorf("request %d: registered %d bytes for %d misses, staged %d for %d", i, r.Cache.H2DBytes, r.Cache.Misses, s.Cache.H2DBytes, s.Cache.Misses)
		}
		misses += r.Cache.Misses
	}
	if misses == 0 {
		t.Error("no request missed: the test does not exercise the transport")
	}
}
