package cache

import (
	"testing"
)

// BenchmarkLeaseWaves: the host's share of a batched prefill's routed
// layer at full residency (runtime/engine routedExpertsBatch): 64 experts
// in waves of 8 (OLMoE-1B-7B's shape), each wave leased with its lookups
// (LeaseBatch), served, and released after the layer's op, as the engine
// does. One op is one layer; -trace records the waves (Options.Trace)
// and takes them after each layer, as a request takes its trace.
func BenchmarkLeaseWaves(b *testing.B) {
	for _, trace := range []bool{false, true} {
		name := "plain"
		if trace {
			name = "trace"
		}
		b.Run(name, func(b *testing.B) { benchLeaseWaves(b, trace) })
	}
}

func benchLeaseWaves(b *testing.B, trace bool) {
	const experts, topK = 64, 8
	auth := newFakeAuthority(b, 1, experts, 256)
	c, err := New(newCPUDevice(b), auth, 1, experts, Options{Capacity: experts, GroupSize: topK, Spares: topK, Staging: 1, Trace: trace})
	if err != nil {
		b.Fatal(err)
	}
	c.Admit()
	b.Cleanup(func() { c.Close() })
	waves := make([][]int, experts/topK)
	uses := make([]int, topK)
	for w := range waves {
		for k := range topK {
			waves[w] = append(waves[w], w*topK+k)
		}
	}
	for k := range uses {
		uses[k] = 8 // 512 prompt tokens x top-8 over 64 experts
	}
	b.ReportAllocs()
	for b.Loop() {
		held := make([]interface{ Release() }, 0, len(waves))
		for _, wave := range waves {
			ls, err := c.LeaseBatch(0, wave, uses)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := ls.Serve(); err != nil {
				b.Fatal(err)
			}
			held = append(held, ls)
		}
		for _, ls := range held {
			ls.Release()
		}
		if trace && len(c.TakeTrace()) != len(waves) {
			b.Fatal("the trace lost waves")
		}
	}
}
