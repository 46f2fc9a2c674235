package cache

import (
	"bytes"
	"fmt"
	"testing"
)

func TestCopyParallel(t *testing.T) {
	for _, c := range []struct{ n, workers int }{
		{0, 4}, {1, 4}, {hostCopyChunk - 1, 8}, {hostCopyChunk * 3, 8}, {3*hostCopyChunk + 17, 2}, {12 << 20, 16}, {5 << 20, 1},
	} {
		t.Run(fmt.Sprintf("%d-bytes/%d-workers", c.n, c.workers), func(t *testing.T) {
			src := make([]byte, c.n)
			for i := range src {
				src[i] = byte(i*7 + i>>11)
			}
			dst := make([]byte, c.n)
			copyParallel(dst, src, c.workers)
			if !bytes.Equal(dst, src) {
				t.Fatal("copy differs")
			}
		})
	}
}

// BenchmarkCopyParallel copies 3 MiB records (one OLMoE expert) out of a
// 384 MiB authority-sized buffer, rotating so that the source is not in
// cache, as on a real miss.
func BenchmarkCopyParallel(b *testing.B) {
	const rec = 3 << 20
	src := make([]byte, 128*rec)
	for i := 0; i < len(src); i += 4096 {
		src[i] = 1
	}
	dst := make([]byte, rec)
	for _, w := range []int{1, 0} {
		b.Run(fmt.Sprintf("workers=%d", w), func(b *testing.B) {
			b.SetBytes(rec)
			for i := 0; i < b.N; i++ {
				off := (i % 128) * rec
				copyParallel(dst, src[off:off+rec], w)
			}
		})
	}
}
