package cache

import (
	"bytes"
	"fmt"
	"testing"
)

// TestStaging: every record lands whole whatever the sizes and worker
// counts, and prefix reports a staged prefix only once its bytes are there:
// at least what was asked (or the record), a multiple of the piece size or
// the record's end, never shrinking.
func TestStaging(t *testing.T) {
	for _, c := range []struct {
		sizes   []int
		workers int
	}{
		{[]int{0}, 4},
		{[]int{1}, 4},
		{[]int{hostCopyChunk - 1}, 8},
		{[]int{hostCopyChunk * 3}, 8},
		{[]int{3*hostCopyChunk + 17, 5}, 2},
		{[]int{12 << 20}, 16},
		{[]int{5 << 20}, 1},
		{[]int{3 << 20, 3 << 20, 3 << 20, 3 << 20, 3 << 20, 3 << 20, 3 << 20, 3 << 20}, 16},
		{[]int{256, 0, 3*hostCopyChunk + 1, 256}, 3},
	} {
		t.Run(fmt.Sprintf("%v-bytes/%d-workers", c.sizes, c.workers), func(t *testing.T) {
			var dsts, srcs [][]byte
			for r, n := range c.sizes {
				src := make([]byte, n)
				for i := range src {
					src[i] = byte(i*7 + i>>11 + r)
				}
				srcs, dsts = append(srcs, src), append(dsts, make([]byte, n))
			}
			s := startStaging(dsts, srcs, c.workers)
			for i, n := range c.sizes {
				last := 0
				for want := 1; ; want += stageRun {
					got := s.prefix(i, want)
					if got < min(want, n) || got < last || (got != n && got%hostCopyChunk != 0) {
						t.Fatalf("record %d: prefix(%d) = %d after %d (record of %d bytes)", i, want, got, last, n)
					}
					if !bytes.Equal(dsts[i][:got], srcs[i][:got]) {
						t.Fatalf("record %d: the staged prefix of %d bytes differs", i, got)
					}
					last = got
					if got == n {
						break
					}
				}
			}
			s.wait()
			for i := range srcs {
				if !bytes.Equal(dsts[i], srcs[i]) {
					t.Fatalf("record %d differs", i)
				}
			}
		})
	}
}

// BenchmarkStaging stages a group of 3 MiB records (OLMoE experts) out of
// a 384 MiB authority-sized buffer, rotating so that the source is not in
// cache, as on real misses, one record a transaction (a decode step's lone
// miss) and eight (a prefill wave's), with one worker and with GOMAXPROCS.
func BenchmarkStaging(b *testing.B) {
	const rec = 3 << 20
	src := make([]byte, 128*rec)
	for i := 0; i < len(src); i += 4096 {
		src[i] = 1
	}
	for _, group := range []int{1, 8} {
		dsts := make([][]byte, group)
		for i := range dsts {
			dsts[i] = make([]byte, rec)
		}
		for _, w := range []int{1, 0} {
			b.Run(fmt.Sprintf("records=%d/workers=%d", group, w), func(b *testing.B) {
				b.SetBytes(int64(group * rec))
				srcs := make([][]byte, group)
				for i := 0; i < b.N; i++ {
					for k := range srcs {
						off := ((i*group + k) % 128) * rec
						srcs[k] = src[off : off+rec]
					}
					startStaging(dsts, srcs, w).wait()
				}
			})
		}
	}
}
