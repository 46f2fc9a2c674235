//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/half"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// testBE is one backend shared by every test and benchmark of the binary:
// opening a context and JIT-loading the PTX takes a while.
var testBE *Backend

func TestMain(m *testing.M) {
	be, err := Open(0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cuda tests need a GPU:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "cuda tests on %s (%d SMs, %d bytes of opt-in shared memory per block; TopK/Argmax results: %s; owner hand-offs spin: %v)\n",
		be.DeviceName(), be.SMs(), be.smemMax, be.ResultPath(), be.o.spin.Load())
	testBE = be
	if os.Getenv("HORIZON_TEST_BATCHED_DEFAULT") == "0" {
		// The whole suite as the default before session 20 ran it: auto
		// prefill token at a time on CUDA (BatchedDefault).
		batchedDefault = false
		fmt.Fprintln(os.Stderr, "cuda tests with auto prefill token at a time (HORIZON_TEST_BATCHED_DEFAULT=0)")
	}
	code := m.Run()
	if err := be.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "close:", err)
		code = 1
	}
	cleanupArtifacts()
	os.Exit(code)
}

func randF32(rng *rand.Rand, n int, std float64) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(rng.NormFloat64() * std)
	}
	return out
}

func randF16(rng *rand.Rand, n int, std float64) []uint16 {
	out := make([]uint16, n)
	for i := range out {
		out[i] = half.F32ToF16(float32(rng.NormFloat64() * std))
	}
	return out
}

// makeRecord builds one expert record with N(0, 0.05) weights.
func makeRecord(t testing.TB, rng *rand.Rand, l qpack.RecordLayout) []byte {
	t.Helper()
	rec := make([]byte, l.Size)
	for _, m := range l.Matrices() {
		if _, err := l.EncodeMatrix(rec, m, randF32(rng, m.Rows*m.Cols, 0.05)); err != nil {
			t.Fatal(err)
		}
	}
	return rec
}

func mustF32(t testing.TB, be backend.Backend, x []float32) backend.Tensor {
	t.Helper()
	tn, err := be.Alloc(len(x))
	if err != nil {
		t.Fatal(err)
	}
	if err := be.WriteF32(tn, x); err != nil {
		t.Fatal(err)
	}
	return tn
}

func mustRead(t testing.TB, be backend.Backend, tn backend.Tensor) []float32 {
	t.Helper()
	out := make([]float32, tn.Len())
	if err := be.ReadF32(tn, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func mustBytes(t testing.TB, be backend.Backend, rec []byte) backend.Tensor {
	t.Helper()
	r, err := be.AllocBytes(len(rec))
	if err != nil {
		t.Fatal(err)
	}
	if err := be.WriteBytes(r, 0, rec); err != nil {
		t.Fatal(err)
	}
	return r
}

// sameBits fails unless a and b are bit-identical.
func sameBits(t testing.TB, what string, a, b []float32) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d values vs %d", what, len(a), len(b))
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			t.Fatalf("%s: value %d = %g vs %g: not bit-identical", what, i, a[i], b[i])
		}
	}
}

// closeTo fails when |a-b| > abs + rel*|b| somewhere; b is the reference.
func closeTo(t testing.TB, what string, a, b []float32, abs, rel float64) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d values vs %d", what, len(a), len(b))
	}
	worst, at := 0.0, -1
	for i := range a {
		d := math.Abs(float64(a[i]) - float64(b[i]))
		if d > abs+rel*math.Abs(float64(b[i])) && d > worst {
			worst, at = d, i
		}
	}
	if at >= 0 {
		t.Fatalf("%s: value %d = %g, reference %g (|diff| %g beyond %g + %g*|ref|)", what, at, a[at], b[at], worst, abs, rel)
	}
}
