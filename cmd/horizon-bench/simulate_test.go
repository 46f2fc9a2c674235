package main

import (
	"encoding/json"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/eviction"
)

var updateSimulate = flag.Bool("update", false, "rewrite testdata/simulate.*")

// simEdition writes a small synthetic edition: configurations of one
// synthetic checkpoint (2 layers of 8 experts, top-2, records of 1000
// bytes), two workers each, with routing traces drawn from a skewed
// router and request counters recorded by the cache model, plus one
// configuration recorded without traces.
func simEdition(t *testing.T, withTraces bool) string {
	t.Helper()
	dir := t.TempDir()
	const layers, experts, topK = 2, 8, 2
	type conf struct {
		id       string
		capacity int
		traces   bool
		msPerTok float64
	}
	confs := []conf{{"tiny-c4", 4, withTraces, 9}, {"tiny-c8", 8, withTraces, 5}, {"tiny-c4-old", 4, false, 9.5}}
	for _, cf := range confs {
		for block := 1; block <= 2; block++ {
			r := rand.New(rand.NewPCG(uint64(block), 3))
			route := func(positions int) []eviction.Event {
				var evs []eviction.Event
				for range positions {
					for l := range layers {
						// Expert e with weight ~ 1/(e+1): a skewed router.
						var ids []int
						for len(ids) < topK {
							e := int(float64(experts) * r.Float64() * r.Float64())
							if !containsInt(ids, e) {
								ids = append(ids, e)
							}
						}
						evs = append(evs, eviction.Event{Kind: eviction.KindLease, Layer: l, IDs: ids})
					}
				}
				return evs
			}
			m, err := eviction.NewModel(eviction.Config{Layers: layers, Experts: experts, Capacity: cf.capacity, Policy: "lru", RecordBytes: 1000, GroupSize: topK})
			if err != nil {
				t.Fatal(err)
			}
			trace := func(evs []eviction.Event) map[string]any {
				data, err := eviction.Encode(evs)
				if err != nil {
					t.Fatal(err)
				}
				return map[string]any{"format": eviction.TraceFormat, "events": len(evs), "data": data}
			}
			apply := func(evs []eviction.Event) eviction.Counters {
				before := m.Counters()
				for _, ev := range evs {
					if err := m.Apply(ev); err != nil {
						t.Fatal(err)
					}
				}
				return m.Counters().Sub(before)
			}
			warm := route(6)
			apply(warm)
			warmup := map[string]any{"excluded": true, "n": 4}
			if cf.traces {
				warmup["routing_trace"] = trace(warm)
			}
			var reqs []any
			for q := range 2 {
				prompt, n := 3+q, 5
				evs := route(prompt + n - 1)
				d := apply(evs)
				req := map[string]any{"index": q, "prompt_id": "p" + string(rune('a'+q)), "prompt_tokens": prompt, "n": n,
					"decode_seconds": cf.msPerTok * float64(n-1) / 1000,
					"cache":          map[string]any{"hits": d.Hits, "misses": d.Misses, "h2d_bytes": d.H2DBytes}}
				if cf.traces {
					req["routing_trace"] = trace(evs)
				}
				reqs = append(reqs, req)
			}
			rec := map[string]any{
				"schema": "horizon.raw", "version": 1, "edition": "sim-test", "config_id": cf.id, "block": block,
				"checkpoint": map[string]any{"kind": "synthetic", "arch": "tiny", "seed": 1},
				"artifact":   map[string]any{"record_bytes": 1000},
				"setup": map[string]any{"model": map[string]any{"layers": layers, "experts_per_layer": experts, "top_k": topK},
					"capacity": cf.capacity, "executor": "grouped-v1", "placement": "canonical", "policy": "lru", "transport": "staged", "prefetch": "off"},
				"warmup":       warmup,
				"requests":     reqs,
				"observations": map[string]any{"h2d_bandwidth_bytes_per_s": 1e6 * float64(block)},
			}
			b, err := json.MarshalIndent(rec, "", " ")
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, "raw", cf.id, "block-"+string(rune('0'+block))+".json")
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

func containsInt(s []int, x int) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

func TestSimulateGolden(t *testing.T) {
	dir := simEdition(t, true)
	for _, format := range []string{"json", "csv", "md"} {
		t.Run(format, func(t *testing.T) {
			r := run(t, "simulate", dir, "-o", format)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			golden := filepath.Join("testdata", "simulate."+format)
			if *updateSimulate {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, []byte(r.stdout), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./cmd/horizon-bench/ -run TestSimulateGolden -update)", err)
			}
			if r.stdout != string(want) {
				t.Errorf("output differs from %s (run go test ./cmd/horizon-bench/ -run TestSimulateGolden -update after checking the change):\n%s", golden, r.stdout)
			}
		})
	}

	// The JSON rows: Belady bounds every policy; the recorded row
	// reproduces the recorded misses and alone carries the measured rate;
	// at full residency the prediction is the full configuration's rate.
	r := run(t, "simulate", dir, "-o", "json")
	var rows []struct {
		Config         string   `json:"config"`
		Policy         string   `json:"policy"`
		Capacity       int      `json:"capacity"`
		Lookups        int64    `json:"lookups"`
		Misses         int64    `json:"misses"`
		MissedBytes    int64    `json:"missed_bytes"`
		RecordedMisses *int64   `json:"recorded_misses"`
		Predicted      *float64 `json:"predicted_decode_tok_s"`
		Measured       *float64 `json:"measured_decode_tok_s"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
		t.Fatal(err)
	}
	type key struct {
		config   string
		capacity int
	}
	opt := map[key]int64{}
	for _, row := range rows {
		if row.Policy == eviction.PolicyBelady {
			opt[key{row.Config, row.Capacity}] = row.Misses
		}
	}
	recorded := 0
	for _, row := range rows {
		if row.Config == "tiny-c4-old" {
			t.Errorf("a configuration without traces was simulated: %+v", row)
		}
		if o, ok := opt[key{row.Config, row.Capacity}]; !ok || o > row.Misses {
			t.Errorf("%s %s c=%d: %d misses, belady %d", row.Config, row.Policy, row.Capacity, row.Misses, o)
		}
		if row.MissedBytes != 1000*row.Misses || row.Lookups != 2*2*(7+8)*2 {
			t.Errorf("%+v: missed bytes or lookups", row)
		}
		if (row.RecordedMisses != nil) != (row.Measured != nil) {
			t.Errorf("%+v: recorded misses without measured rate", row)
		}
		if row.RecordedMisses != nil {
			recorded++
			if row.Policy != "lru" || *row.RecordedMisses != row.Misses {
				t.Errorf("recorded row %s %s c=%d: replay %d misses, recorded %d", row.Config, row.Policy, row.Capacity, row.Misses, *row.RecordedMisses)
			}
		}
		if row.Predicted == nil {
			t.Errorf("%+v: no prediction", row)
		} else if row.Capacity == 8 && (*row.Predicted < 199.99 || *row.Predicted > 200.01) {
			t.Errorf("full residency predicted %v tok/s, want 200 (5 ms/token)", *row.Predicted)
		}
	}
	if recorded != 2 {
		t.Errorf("%d recorded rows, want 2 (tiny-c4 at 4, tiny-c8 at 8)", recorded)
	}
}

func TestSimulateUsage(t *testing.T) {
	traced, old := simEdition(t, true), simEdition(t, false)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no edition", []string{"simulate"}, "which edition?"},
		{"not an edition", []string{"simulate", t.TempDir()}, "no raw records"},
		{"no traces", []string{"simulate", old}, "has no routing traces"},
		{"config without traces", []string{"simulate", traced, "--configs", "tiny-c4-old"}, "tiny-c4-old has no routing traces"},
		{"unknown config", []string{"simulate", traced, "--configs", "tiny-c9"}, `no configuration "tiny-c9"`},
		{"unknown policy", []string{"simulate", traced, "--policy", "lru,clock"}, `--policy "clock"`},
		{"capacity below top-k", []string{"simulate", traced, "--capacity", "1,4"}, "capacity 1 outside 2..8"},
		{"bad capacity", []string{"simulate", traced, "--capacity", "four"}, `--capacity "four"`},
		{"bad format", []string{"simulate", traced, "-o", "xml"}, `-o "xml"`},
		{"two editions", []string{"simulate", traced, old}, "takes one edition directory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, tc.args...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
				t.Errorf("exit %d, stderr %q; want exit %d and one line with %q", r.code, r.stderr, exitUsage, tc.want)
			}
		})
	}
	if r := run(t, "simulate", "--help"); r.code != 0 || !strings.Contains(r.stdout, "Example:") || !strings.Contains(r.stdout, "belady") {
		t.Errorf("--help: exit %d\n%s", r.code, r.stdout)
	}
}

// TestSimulateWaves: --waves published-first replays session 40's
// prefill-v1 c30 batched prefill (the committed edition) with each layer's
// batch served resident experts first, as runtime/engine now does: 5,910
// misses over its 15 requests where the recorded first-use waves made
// 11,436 (the recorded rule still reproduces the records). It drops
// belady from the default policies, refuses it when named, refuses an
// unknown rule, and leaves out the recorded misses, which belong to the
// recorded waves.
func TestSimulateWaves(t *testing.T) {
	ed := filepath.Join("..", "..", "editions", "prefill-v1")
	cfg := "olmoe-0924-c30-grouped-batched"
	for _, tc := range []struct {
		waves, misses, recorded string
	}{
		{"recorded", "11436", "11436"},
		{"published-first", "5910", "-"},
	} {
		r := run(t, "simulate", ed, "--configs", cfg, "--policy", "lru", "--capacity", "30", "--waves", tc.waves, "-o", "csv")
		if r.code != 0 {
			t.Fatalf("--waves %s: exit %d: %s", tc.waves, r.code, r.stderr)
		}
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != 2 {
			t.Fatalf("--waves %s: %d lines:\n%s", tc.waves, len(lines), r.stdout)
		}
		f := strings.Split(lines[1], ",")
		if f[3] != tc.waves || f[5] != tc.misses || f[10] != tc.recorded {
			t.Errorf("--waves %s: waves %s, misses %s, recorded %s; want %s, %s, %s", tc.waves, f[3], f[5], f[10], tc.waves, tc.misses, tc.recorded)
		}
	}
	r := run(t, "simulate", ed, "--configs", cfg, "--capacity", "30", "--waves", "published-first", "-o", "csv")
	if r.code != 0 || strings.Contains(r.stdout, eviction.PolicyBelady) || strings.Count(r.stdout, "\n") != 1+len(eviction.Policies()) {
		t.Errorf("default policies under published-first: exit %d, %s%s", r.code, r.stdout, r.stderr)
	}
	for _, args := range [][]string{{"--waves", "published-first", "--policy", "lru,belady"}, {"--waves", "sorted"}} {
		if r := run(t, append([]string{"simulate", ed}, args...)...); r.code != 2 || !strings.Contains(r.stderr, "--waves") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and a --waves error", args, r.code, r.stderr)
		}
	}
}
