package cache

import (
	"runtime"
	"sync"
)

// hostCopyChunk is the smallest piece of a record one goroutine copies into
// staging. One core copies uncached memory at roughly 10-20 GB/s, slower
// than the ~53 GB/s pinned H2D transfer that follows (GPU-NOTES.md), so the
// authority -> staging copy of a record is split across cores
// (BenchmarkCopyParallel measures both ways on the machine at hand).
const hostCopyChunk = 256 << 10

// copyParallel copies src into dst (equal lengths) on up to workers
// goroutines in contiguous chunks of at least hostCopyChunk bytes.
func copyParallel(dst, src []byte, workers int) {
	n := len(src)
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	parts := min(workers, n/hostCopyChunk)
	if parts <= 1 {
		copy(dst, src)
		return
	}
	step := (n + parts - 1) / parts
	var wg sync.WaitGroup
	for lo := step; lo < n; lo += step {
		hi := min(lo+step, n)
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			copy(dst[lo:hi], src[lo:hi])
		}(lo, hi)
	}
	copy(dst[:step], src[:step])
	wg.Wait()
}
