package cache

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// hostCopyChunk is the piece of a record one goroutine copies into staging
// at a time. One core copies uncached memory at roughly 10-20 GB/s, slower
// than the ~53 GB/s pinned H2D transfer that follows (GPU-NOTES.md), so the
// authority -> staging copies are split across cores (BenchmarkStaging
// measures them on the machine at hand). Pieces are small next to a record
// (3.2 MB for OLMoE-1B-7B) so that a record lands front to back at the
// cores' joint rate, not all at once at the end: its first runs can then
// be on the copy stream while the rest is copied.
const hostCopyChunk = 64 << 10

// stageRun is how many bytes of a record one staged copy call moves: the
// staged transport puts a record on the copy stream in runs of this many
// bytes (the last one shorter), each as soon as its bytes are staged, so
// the H2D of a record's first runs overlaps the host copy of its later
// ones, and a lone miss pays its host copy and one run's transfer, not the
// host copy and the whole record's transfer one after the other. A run is
// one copy call (on CUDA a round trip to the owner thread and an event), so
// a record goes in a few runs (OLMoE-1B-7B's 3.2 MB in four). The runs are
// cut at fixed offsets, whatever has landed, so a record's copy calls do
// not depend on the host's timing.
const stageRun = 1 << 20

// staging copies records (srcs[i] into dsts[i], equal lengths) into
// staging buffers on up to workers goroutines, in pieces of hostCopyChunk
// bytes taken in record order, and lets one caller goroutine follow each
// record's staged prefix (prefix) while the copies go on: the caller puts a
// record's first bytes on the copy stream while its last are still being
// copied. The goroutines are started once for all the records (one fork
// and join a transaction, not one a record).
type staging struct {
	dsts, srcs [][]byte
	rec, off   []int         // piece g: record rec[g], bytes off[g]..+hostCopyChunk
	first      []int         // record i's pieces: first[i] .. first[i+1]-1
	landed     []atomic.Bool // piece g is copied
	news       chan struct{} // a token per landed piece (buffered: never blocks)
	next       atomic.Int64  // the next piece to take
	wg         sync.WaitGroup
	cursor     []int // record i's pieces known landed from its first (caller only)
}

// startStaging starts copying; workers <= 0 means GOMAXPROCS. With fewer
// than two pieces in all, or one worker, it copies everything before it
// returns.
func startStaging(dsts, srcs [][]byte, workers int) *staging {
	s := &staging{dsts: dsts, srcs: srcs, first: make([]int, len(srcs)+1), cursor: make([]int, len(srcs))}
	for i, src := range srcs {
		if len(dsts[i]) != len(src) {
			panic("cache: staging a record into a buffer of another length")
		}
		s.first[i] = len(s.rec)
		for o := 0; o == 0 || o < len(src); o += hostCopyChunk {
			s.rec, s.off = append(s.rec, i), append(s.off, o)
		}
		s.cursor[i] = s.first[i]
	}
	n := len(s.rec)
	s.first[len(srcs)] = n
	s.landed = make([]atomic.Bool, n)
	s.news = make(chan struct{}, n)
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, n)
	if workers <= 1 {
		s.work()
		return s
	}
	s.wg.Add(workers)
	for range workers {
		go func() {
			defer s.wg.Done()
			s.work()
		}()
	}
	return s
}

// work copies pieces until none is left.
func (s *staging) work() {
	for {
		g := int(s.next.Add(1) - 1)
		if g >= len(s.rec) {
			return
		}
		i, o := s.rec[g], s.off[g]
		e := min(o+hostCopyChunk, len(s.srcs[i]))
		copy(s.dsts[i][o:e], s.srcs[i][o:e])
		s.landed[g].Store(true)
		s.news <- struct{}{}
	}
}

// prefix waits until record i's staged prefix holds at least want bytes,
// or the whole record, and returns its length (a multiple of
// hostCopyChunk, or the record's length). One goroutine calls it.
func (s *staging) prefix(i, want int) int {
	want = min(want, len(s.srcs[i]))
	for {
		for s.cursor[i] < s.first[i+1] && s.landed[s.cursor[i]].Load() {
			s.cursor[i]++
		}
		got := len(s.srcs[i])
		if s.cursor[i] < s.first[i+1] {
			got = s.off[s.cursor[i]]
		}
		if got >= want {
			return got
		}
		<-s.news
	}
}

// wait returns once every copy has finished.
func (s *staging) wait() { s.wg.Wait() }
