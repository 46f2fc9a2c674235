//go:build cuda

package cuda

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/horizon-runmap/horizon/runtime/device"
	"github.com/horizon-runmap/horizon/runtime/engine"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// BenchmarkMissService: the residency cache's miss service on this GPU and
// its host, apart from any compute: transactions of one miss (a decode
// step's usual group) and of top-k misses (a batched prefill's wave), each
// group of experts the layer has not published (capacity top-k, so a
// group of new experts evicts the last one), layers in turn, with the
// staged and the registered transport, at GOMAXPROCS 4, 8 and every CPU
// (the staged transport's host copies run on GOMAXPROCS-2 goroutines).
// Reports µs a miss and the records' GB/s, beside which the pinned H2D
// rate (BenchmarkH2D, GPU-NOTES.md: ~53-55 GB/s) is the transfer's bound.
// The first artifact of HORIZON_BENCH_ARTIFACTS (OLMoE-1B-7B shape: 3.2 MB
// records); HORIZON_BENCH_PROCS (comma-separated) replaces the GOMAXPROCS
// list. Run with -benchtime 200x or so.
func BenchmarkMissService(b *testing.B) {
	dirs := os.Getenv("HORIZON_BENCH_ARTIFACTS")
	if dirs == "" {
		b.Skip("HORIZON_BENCH_ARTIFACTS not set")
	}
	art, err := qpack.Open(strings.Split(dirs, ":")[0])
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := art.Config()
	if err != nil {
		b.Fatal(err)
	}
	procs := []int{4, 8, runtime.NumCPU()}
	if s := os.Getenv("HORIZON_BENCH_PROCS"); s != "" {
		procs = nil
		for _, f := range strings.Split(s, ",") {
			var n int
			if _, err := fmt.Sscan(f, &n); err != nil || n < 1 {
				b.Fatalf("HORIZON_BENCH_PROCS: %q is not a positive count", f)
			}
			procs = append(procs, n)
		}
	}
	record := art.Layout().Size
	for _, tr := range []string{"staged", "registered"} {
		l, err := engine.Load(testBE, testBE.ExpertRows(), art, engine.LoadOptions{Executor: "grouped-v1", Capacity: cfg.TopK, Transport: tr})
		if err != nil {
			b.Fatal(err)
		}
		next := cfg.TopK // canonical placement: experts 0..top-k-1 start resident
		for _, group := range []int{1, cfg.TopK} {
			for _, p := range procs {
				b.Run(fmt.Sprintf("%s/group=%d/procs=%d", tr, group, p), func(b *testing.B) {
					defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(p))
					ids := make([]int, group)
					var spent time.Duration
					for i := range b.N {
						layer := i % cfg.NumLayers
						snap, err := l.Cache.Snapshot(layer)
						if err != nil {
							b.Fatal(err)
						}
						for k := range ids {
							for snap.Rows[next] != nil || containsID(ids[:k], next) {
								next = (next + 1) % cfg.NumExperts
							}
							ids[k] = next
							next = (next + 1) % cfg.NumExperts
						}
						t0 := time.Now()
						_, release, err := device.Acquire(l.Cache, layer, ids)
						if err != nil {
							b.Fatal(err)
						}
						spent += time.Since(t0)
						release()
					}
					misses := float64(b.N * group)
					b.ReportMetric(spent.Seconds()/misses*1e6, "µs/miss")
					b.ReportMetric(misses*float64(record)/spent.Seconds()/1e9, "GB/s")
				})
			}
		}
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

func containsID(ids []int, x int) bool {
	for _, v := range ids {
		if v == x {
			return true
		}
	}
	return false
}
