package engine

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/cache"
	"github.com/horizon-runmap/horizon/runtime/cpu"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// routeCounter counts the device routings a batched prefill takes.
type routeCounter struct {
	*cpu.Backend
	routes int
}

func (r *routeCounter) RouteRows(logits backend.Tensor, T, k int, rows []backend.Tensor, lay qpack.RecordLayout) (backend.Routing, error) {
	r.routes++
	return r.Backend.RouteRows(logits, T, k, rows, lay)
}

// TestDeviceRoutedPrefill: with the backend's device routing on
// (backend.DeviceRouting), a batched prefill at full residency routes every
// layer on the device and counts the leases after the batch, and gives the
// read-back path's tokens, logits (bit for bit), cache counters and routing
// trace; at partial residency (no pinned snapshot) it keeps the read back.
// Several chunks, both architectures, both expert schemes.
func TestDeviceRoutedPrefill(t *testing.T) {
	prompts := [][]int{{7}, promptIDs("Hello"), promptIDs(strings.Repeat("Routing stays on the device. ", 3))}
	for _, arch := range []string{"olmoe-tiny", "qwen2moe-tiny"} {
		for _, scheme := range []qpack.Scheme{qpack.SchemeInt4, qpack.SchemeFP16} {
			art := testArtifact(t, arch, scheme)
			cfg, err := art.Config()
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []int{cfg.NumExperts, cfg.TopK + 1} {
				t.Run(fmt.Sprintf("%s/%s/c%d", arch, scheme, c), func(t *testing.T) {
					run := func(dev bool, p []int) (Result, cache.Counters, []any, int) {
						be := &routeCounter{Backend: cpu.New(0)}
						be.SetDeviceRouting(dev)
						l := loadOnCPU(t, be, be.Backend, art, LoadOptions{Executor: "grouped-v1", Capacity: c, Prefill: PrefillBatched, Trace: true})
						l.chunk = 16
						l.Cache.BeginRequest()
						res, err := l.Generate(Request{Prompt: p, Tokens: 4, SuppressEOS: true, LogitSteps: 4})
						if err != nil {
							t.Fatal(err)
						}
						cn, err := l.Cache.EndRequest()
						if err != nil {
							t.Fatal(err)
						}
						var tr []any
						for _, ev := range l.Cache.TakeTrace() {
							tr = append(tr, ev)
						}
						return res, cn, tr, be.routes
					}
					for _, p := range prompts {
						want, wc, wt, wr := run(false, p)
						got, gc, gt, gr := run(true, p)
						if wr != 0 {
							t.Fatalf("prompt of %d: %d device routings with it off", len(p), wr)
						}
						chunks := (len(p) + 15) / 16
						if c == cfg.NumExperts && gr != chunks*cfg.NumLayers {
							t.Fatalf("prompt of %d at full residency: %d device routings, want %d (a layer a chunk)", len(p), gr, chunks*cfg.NumLayers)
						}
						if c != cfg.NumExperts && gr != 0 {
							t.Fatalf("prompt of %d at capacity %d: %d device routings, want none (no pinned snapshot)", len(p), c, gr)
						}
						if !reflect.DeepEqual(got.Tokens, want.Tokens) {
							t.Fatalf("prompt of %d: tokens %v, read back %v", len(p), got.Tokens, want.Tokens)
						}
						for s := range want.Logits {
							for i := range want.Logits[s] {
								if math.Float32bits(got.Logits[s][i]) != math.Float32bits(want.Logits[s][i]) {
									t.Fatalf("prompt of %d, step %d, logit %d: %g, read back %g", len(p), s, i, got.Logits[s][i], want.Logits[s][i])
								}
							}
						}
						if !reflect.DeepEqual(gc, wc) {
							t.Fatalf("prompt of %d: counters %+v, read back %+v", len(p), gc, wc)
						}
						if len(wt) == 0 || !reflect.DeepEqual(gt, wt) {
							t.Fatalf("prompt of %d: a trace of %d events, read back %d (or they differ)", len(p), len(gt), len(wt))
						}
					}
				})
			}
		}
	}
}
