package fidelity

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkCompare is one teacher-forced position at the full shapes'
// vocabularies (OLMoE-1B-7B 50,304; Qwen1.5-MoE 151,936): a fidelity
// worker computes 2,560 of them a shard.
func BenchmarkCompare(b *testing.B) {
	for _, v := range []int{50304, 151936} {
		b.Run(fmt.Sprintf("vocab-%d", v), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			ref, trt := make([]float32, v), make([]float32, v)
			for i := range ref {
				ref[i] = float32(r.NormFloat64() * 3)
				trt[i] = ref[i] + float32(r.NormFloat64()*0.05)
			}
			b.ResetTimer()
			for range b.N {
				if _, err := Compare(0, 1, ref, trt, 4); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
