package cpu

import (
	"runtime"
	"sync"
)

// parallelMinWork is the number of multiply-adds below which an op runs on
// the calling goroutine: splitting a 256x256 matvec costs more in
// synchronisation than it saves.
const parallelMinWork = 1 << 16

// parallelRows runs fn over [0, n) split into contiguous chunks, one per
// worker. work is the approximate number of multiply-adds in total.
func parallelRows(n, work, workers int, fn func(lo, hi int)) {
	if workers <= 1 || work < parallelMinWork || n < 2 {
		fn(0, n)
		return
	}
	if workers > n {
		workers = n
	}
	var wg sync.WaitGroup
	chunk := (n + workers - 1) / workers
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			fn(lo, hi)
		}(lo, hi)
	}
	wg.Wait()
}

func defaultWorkers() int { return runtime.GOMAXPROCS(0) }
