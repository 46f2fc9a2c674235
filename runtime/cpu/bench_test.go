package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// BenchmarkExpertMatVec measures the W4A16 (and FP16) expert matvec at the
// real expert shapes. GB/s counts the matrix bytes read (packed values and
// scales); several records are rotated so that the data is not all in cache.
func BenchmarkExpertMatVec(b *testing.B) {
	shapes := []struct {
		name        string
		hidden, ffn int
	}{{"olmoe", 2048, 1024}, {"qwen", 2048, 1408}}
	for _, s := range shapes {
		for _, scheme := range []qpack.Scheme{qpack.SchemeInt4, qpack.SchemeFP16} {
			for _, workers := range []int{1, 0} {
				name := fmt.Sprintf("%s/%s/workers=%d", s.name, scheme, workers)
				b.Run(name, func(b *testing.B) { benchExpert(b, s.hidden, s.ffn, scheme, workers) })
			}
		}
	}
}

func benchExpert(b *testing.B, hidden, ffn int, scheme qpack.Scheme, workers int) {
	be := New(workers)
	layout, err := qpack.NewRecordLayout(scheme, hidden, ffn)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	const records = 16 // 16 x ~3 MiB: larger than the caches of this machine
	rows := make([]backend.Tensor, records)
	for i := range rows {
		rec := make([]byte, layout.Size)
		for j := range rec {
			rec[j] = byte(rng.Uint32())
		}
		// Keep FP16 scales / values finite: clear the exponent's top bit.
		for j := 1; j < len(rec); j += 2 {
			rec[j] &= 0x3b
		}
		rows[i], _ = be.AllocBytes(len(rec))
		_ = be.WriteBytes(rows[i], 0, rec)
	}
	x, _ := be.Alloc(hidden)
	xs := make([]float32, hidden)
	for i := range xs {
		xs[i] = float32(rng.NormFloat64())
	}
	_ = be.WriteF32(x, xs)
	dst, _ := be.Alloc(ffn)
	m := layout.Gate
	b.SetBytes(int64(m.Bytes))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := be.ExpertMatVec(dst, rows[i%records], m, scheme, x); err != nil {
			b.Fatal(err)
		}
	}
}
