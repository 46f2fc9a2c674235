//go:build cuda

package cuda

import (
	"testing"

	"github.com/horizon-runmap/horizon/runtime/backend/backendtest"
)

// tolerances are the CPU reference's: with FP32 activations on the device
// the CUDA backend differs from the float64 reference only by FP32 rounding
// in other (fixed) reduction orders and by libm's last-place differences.
var tolerances = map[string]backendtest.Tolerance{
	"matvec":    {Abs: 1e-4, Rel: 1e-4},
	"expert":    {Abs: 1e-4, Rel: 1e-4},
	"rmsnorm":   {Abs: 1e-5, Rel: 1e-5},
	"rope":      {Abs: 1e-5, Rel: 1e-5},
	"attention": {Abs: 1e-5, Rel: 1e-4},
	"elementw":  {Abs: 1e-6, Rel: 1e-6},
	"topk":      {Abs: 1e-6, Rel: 1e-5},
}

// The suite's batched section checks backend.Batched's row contract (each
// token the per-token op's bits), which the row kernels keep; the suite
// runs with them (tuning.noMatmulTC). The default tensor-core path of the
// batched ops gives other bits within a bound of a float64 reference, and
// is checked as such by TestMatmulTC, TestExpertMatMulGroupTC and
// TestBatchedPrefillTensorCores.
func TestConformanceTiny(t *testing.T) {
	withTuning(t, testBE, tuning{noMatmulTC: true})
	backendtest.Run(t, testBE, backendtest.TinyShapes, tolerances)
}

// realShapes are the matrices of OLMoE-1B-7B and Qwen1.5-MoE-A2.7B:
// attention and shared-expert projections, the two lm_heads, expert gate/up
// and down (Qwen's down has 1408 inputs: padded INT4 blocks).
var realShapes = []backendtest.Shape{
	{Rows: 2048, Cols: 2048}, {Rows: 50304, Cols: 2048}, {Rows: 151936, Cols: 2048},
	{Rows: 1024, Cols: 2048}, {Rows: 2048, Cols: 1024}, {Rows: 1408, Cols: 2048}, {Rows: 2048, Cols: 1408},
}

func TestConformanceRealShapes(t *testing.T) {
	if testing.Short() {
		t.Skip("real shapes take a minute of host-side reference arithmetic")
	}
	withTuning(t, testBE, tuning{noMatmulTC: true})
	backendtest.Run(t, testBE, realShapes, tolerances)
}
