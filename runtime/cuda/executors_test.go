//go:build cuda

package cuda

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/cpu"
	"github.com/horizon-runmap/horizon/runtime/executor"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// expertCases are the routed groups of the real models and the tiny ones.
var expertCases = []struct {
	name        string
	scheme      qpack.Scheme
	hidden, ffn int
	topK        int
}{
	{"olmoe int4", qpack.SchemeInt4, 2048, 1024, 8},
	{"qwen int4 (padded down)", qpack.SchemeInt4, 2048, 1408, 4},
	{"olmoe fp16", qpack.SchemeFP16, 2048, 1024, 8},
	{"qwen fp16", qpack.SchemeFP16, 2048, 1408, 4},
	{"qwen-tiny int4", qpack.SchemeInt4, 256, 352, 4},
	{"odd group of 7", qpack.SchemeInt4, 256, 256, 7},
}

// TestExecutorsBitIdentical runs every executor (scalar-v1, grouped-v1) on
// the GPU at the real models' shapes: their outputs must be bit-identical to
// each other (one per-row reduction, k-ordered combine) and close to the
// CPU backend's.
func TestExecutorsBitIdentical(t *testing.T) {
	for _, c := range expertCases {
		t.Run(c.name, func(t *testing.T) {
			l, err := qpack.NewRecordLayout(c.scheme, c.hidden, c.ffn)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(11, uint64(c.ffn)))
			recs := make([][]byte, c.topK)
			for k := range recs {
				recs[k] = makeRecord(t, rng, l)
			}
			xs := randF32(rng, c.hidden, 1)
			weights := make([]float32, c.topK)
			for i := range weights {
				weights[i] = rng.Float32()
			}
			run := func(be backend.Backend, name string) []float32 {
				rows := make([]backend.Tensor, c.topK)
				for k := range rows {
					rows[k] = mustBytes(t, be, recs[k])
				}
				ex, err := executor.New(name, be, l, c.topK)
				if err != nil {
					t.Fatal(err)
				}
				out, _ := be.Alloc(c.hidden)
				if err := ex.Forward(out, mustF32(t, be, xs), rows, weights); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				return mustRead(t, be, out)
			}
			want := run(cpu.New(0), "scalar-v1")
			var first []float32
			for _, name := range executor.Names() {
				got := run(testBE, name)
				if first == nil {
					first = got
					closeTo(t, "scalar-v1 on the GPU vs the CPU", got, want, 1e-4, 1e-4)
					continue
				}
				sameBits(t, fmt.Sprintf("%s vs scalar-v1", name), got, first)
			}
		})
	}
}
