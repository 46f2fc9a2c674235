package engine

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/eviction"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// TestBatchedPrefillWavesMissOnlyNonResident: at partial residency a
// batched prefill's waves serve the experts a layer has published first
// (publishedFirst), so each layer of each batch misses exactly its distinct
// experts that were not resident when the layer began: no miss evicts an
// expert a later wave of the batch needs. Checked by replaying each
// request's routing trace through eviction.Model (the cache's counters,
// which the replay must reproduce), on both tiny models, at several
// capacities, over prompts of several batches, one request after another;
// and horizon-bench simulate's rule (eviction.WavesPublishedFirst) leaves
// the engine's traces as they are.
func TestBatchedPrefillWavesMissOnlyNonResident(t *testing.T) {
	prompts := [][]int{
		promptIDs(strings.Repeat("Waves lease what fits, residents first. ", 3)),
		promptIDs("A second prompt routes elsewhere, and misses what it must."),
		promptIDs(strings.Repeat("Short. ", 9)),
	}
	for _, arch := range []string{"olmoe-tiny", "qwen2moe-tiny"} {
		art := testArtifact(t, arch, qpack.SchemeInt4)
		cfg, err := art.Config()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []int{cfg.TopK, cfg.TopK + 1, (cfg.TopK + cfg.NumExperts) / 2} {
			t.Run(fmt.Sprintf("%s/c%d", arch, c), func(t *testing.T) {
				l := loadEngine(t, arch, qpack.SchemeInt4, LoadOptions{Executor: "grouped-v1", Capacity: c, Prefill: PrefillBatched, Trace: true})
				l.chunk = 16
				m, err := eviction.NewModel(eviction.Config{Layers: cfg.NumLayers, Experts: cfg.NumExperts, Capacity: c,
					RecordBytes: int64(art.Layout().Size), GroupSize: cfg.TopK})
				if err != nil {
					t.Fatal(err)
				}
				l.Cache.TakeTrace() // admission's: none expected, but start clean
				batches := 0
				var traces [][]eviction.Event
				for _, p := range prompts {
					l.Cache.BeginRequest()
					if _, err := l.Generate(Request{Prompt: p, Tokens: 2, SuppressEOS: true}); err != nil {
						t.Fatal(err)
					}
					got, err := l.Cache.EndRequest()
					if err != nil {
						t.Fatal(err)
					}
					before := m.Counters()
					evs := l.Cache.TakeTrace()
					traces = append(traces, evs)
					for i := 0; i < len(evs); {
						ev := evs[i]
						if ev.Kind != eviction.KindBatch {
							if err := m.Apply(ev); err != nil {
								t.Fatal(err)
							}
							i++
							continue
						}
						// One layer of one batch: its consecutive wave events.
						res := m.Resident(ev.Layer)
						want := 0
						j := i
						for ; j < len(evs) && evs[j].Kind == eviction.KindBatch && evs[j].Layer == ev.Layer; j++ {
							for _, e := range evs[j].IDs {
								if !slices.Contains(res, e) {
									want++
								}
							}
						}
						m0 := m.Counters().Misses
						for _, w := range evs[i:j] {
							if err := m.Apply(w); err != nil {
								t.Fatal(err)
							}
						}
						if miss := m.Counters().Misses - m0; miss != int64(want) {
							t.Fatalf("prompt of %d, layer %d, waves %d..%d: %d misses, %d of the batch's experts were not resident", len(p), ev.Layer, i, j, miss, want)
						}
						batches++
						i = j
					}
					d := m.Counters().Sub(before)
					if d.Hits != got.Hits || d.Misses != got.Misses || d.Evictions != got.Evictions {
						t.Fatalf("prompt of %d: replay %d/%d/%d hits/misses/evictions, the cache %d/%d/%d", len(p), d.Hits, d.Misses, d.Evictions, got.Hits, got.Misses, got.Evictions)
					}
				}
				if batches == 0 {
					t.Fatal("no batch events in the traces")
				}
				// The simulator's rule is the engine's: the traces replay
				// to the same misses with their waves reordered by it.
				sim := eviction.Config{Layers: cfg.NumLayers, Experts: cfg.NumExperts, Capacity: c, GroupSize: cfg.TopK, RecordBytes: 1}
				w := []eviction.Worker{{Requests: traces}}
				rec, err := eviction.SimulateWaves(sim, false, eviction.WavesRecorded, w)
				if err != nil {
					t.Fatal(err)
				}
				pub, err := eviction.SimulateWaves(sim, false, eviction.WavesPublishedFirst, w)
				if err != nil {
					t.Fatal(err)
				}
				if rec.Misses != pub.Misses || rec.Misses != m.Counters().Misses {
					t.Fatalf("the engine's traces: %d misses replayed as recorded, %d published first, %d in the check above", rec.Misses, pub.Misses, m.Counters().Misses)
				}
			})
		}
	}
}
