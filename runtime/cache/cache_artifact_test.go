package cache

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/cpu"
	"github.com/horizon-runmap/horizon/runtime/device"
)

// TestResidency runs the artifact's experts through caches of several
// capacities: with capacity == experts there is not a single miss after
// warm-up (nor during it: the initial placement is everything).
func TestResidency(t *testing.T) {
	auth, art, cfg := artifactAuthority(t)
	size := int64(art.Layout().Size)
	cases := []struct {
		name       string
		capacity   int
		wantMisses bool
	}{
		{"full", cfg.NumExperts, false},
		{"partial", cfg.NumExperts / 2, true},
		{"top-k", cfg.TopK, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(newCPUDevice(t), auth, cfg.NumLayers, cfg.NumExperts, Options{
				Capacity: tc.capacity, Spares: cfg.TopK, Staging: 2, GroupSize: cfg.TopK,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.Admit()
			prep := c.Preparation()
			placed := int64(cfg.NumLayers * tc.capacity)
			if prep.H2DCopies != placed || prep.H2DBytes != placed*size || prep.Hits+prep.Misses+prep.Evictions != 0 {
				t.Fatalf("preparation counters %+v, want %d copies of the initial placement", prep, placed)
			}
			r := rand.New(rand.NewPCG(3, 4))
			step := func() int64 {
				for l := 0; l < cfg.NumLayers; l++ {
					ids := randomGroup(r, cfg.NumExperts, cfg.TopK)
					rows, release, err := device.Acquire(c, l, ids)
					if err != nil {
						t.Fatal(err)
					}
					for i, e := range ids {
						checkRow(t, auth, rows[i], l, e)
					}
					release()
				}
				return int64(cfg.NumLayers * cfg.TopK)
			}
			for range 10 { // warm-up
				step()
			}
			c.BeginRequest()
			var requested int64
			for range 50 {
				requested += step()
			}
			d, err := c.EndRequest()
			if err != nil {
				t.Fatal(err)
			}
			if d.Hits+d.Misses != requested || d.H2DBytes != d.Misses*size || d.H2DCopies != d.Misses {
				t.Fatalf("request counters %+v for %d requested", d, requested)
			}
			if !tc.wantMisses && (d.Misses != 0 || d.H2DBytes != 0 || d.Evictions != 0) {
				t.Fatalf("full residency: %d misses, %d H2D bytes, %d evictions after warm-up", d.Misses, d.H2DBytes, d.Evictions)
			}
			if tc.wantMisses && d.Misses == 0 {
				t.Fatalf("capacity %d of %d never missed", tc.capacity, cfg.NumExperts)
			}
			t.Logf("capacity %d: %d hits, %d misses, %d H2D bytes", tc.capacity, d.Hits, d.Misses, d.H2DBytes)
		})
	}
}

// TestRowsServeExecutors: rows the cache hands out (initial placement and
// loaded on a miss) give the CPU backend exactly the results of the same
// record uploaded directly.
func TestRowsServeExecutors(t *testing.T) {
	auth, art, cfg := artifactAuthority(t)
	be := cpu.New(1)
	c, err := New(NewCPUDevice(be), auth, cfg.NumLayers, cfg.NumExperts, Options{
		Capacity: cfg.TopK, Spares: cfg.TopK, Staging: 1, GroupSize: cfg.TopK,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	layout := art.Layout()
	x := make([]float32, cfg.HiddenSize)
	for i := range x {
		x[i] = float32(math.Sin(float64(i)))
	}
	xt, _ := be.Alloc(cfg.HiddenSize)
	be.WriteF32(xt, x)
	matvec := func(rec backend.Tensor) []float32 {
		m := layout.Gate
		dst, _ := be.Alloc(m.Rows)
		if err := be.ExpertMatVec(dst, rec, m, art.Scheme(), xt); err != nil {
			t.Fatal(err)
		}
		out := make([]float32, m.Rows)
		be.ReadF32(dst, out)
		return out
	}
	for _, ids := range [][]int{{0, 1, 2, 3}, {9, 1, 12, 5}} { // hits, then misses
		rows, release, err := device.Acquire(c, 2, ids)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range ids {
			direct, _ := be.AllocBytes(layout.Size)
			be.WriteBytes(direct, 0, auth.Record(2, e))
			if got, want := matvec(rows[i]), matvec(direct); !slices.Equal(got, want) {
				t.Fatalf("expert %d: cached row gives different gate_proj output", e)
			}
		}
		release()
	}
}

func TestCountersJSON(t *testing.T) {
	auth := newFakeAuthority(t, 2, 4, 64)
	c, err := New(newCPUDevice(t), auth, 2, 4, Options{Capacity: 2, Spares: 1, Staging: 1, GroupSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.EndRequest(); err == nil {
		t.Fatal("EndRequest without BeginRequest succeeded")
	}
	if c.Admitted() {
		t.Fatal("admitted before Admit")
	}
	c.Admit()
	c.Admit() // idempotent
	c.BeginRequest()
	_, rel, _ := device.Acquire(c, 1, []int{3})
	rel()
	_, rel, _ = device.Acquire(c, 1, []int{3})
	rel()
	d, err := c.EndRequest()
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	json.Unmarshal(b, &got)
	want := map[string]any{
		"hits": 1.0, "misses": 1.0, "evictions": 1.0, "h2d_bytes": 64.0, "h2d_copies": 1.0,
		"staging_bytes": 64.0, "host_registered_bytes": 0.0, "host_register_ns": 0.0,
		"d2h_expert_bytes": 0.0, "writebacks": 0.0, "authority_writes": 0.0,
		"request_hash_bytes": 0.0, "request_artifact_reads": 0.0,
		"layer_hits": []any{0.0, 1.0}, "layer_misses": []any{0.0, 1.0}, "layer_evictions": []any{0.0, 1.0},
		"layer_h2d_bytes": []any{0.0, 64.0}, "layer_h2d_copies": []any{0.0, 1.0},
	}
	if len(got) != len(want) {
		t.Fatalf("JSON has %d fields, want %d: %s", len(got), len(want), b)
	}
	for k, v := range want {
		gb, _ := json.Marshal(got[k])
		wb, _ := json.Marshal(v)
		if string(gb) != string(wb) {
			t.Errorf("%s = %s, want %s", k, gb, wb)
		}
	}
	if p := c.Preparation(); p.H2DCopies != 4 || p.Hits != 0 {
		t.Fatalf("preparation %+v, want the 4 initial copies only", p)
	}
}
