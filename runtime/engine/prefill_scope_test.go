package engine

import (
	"testing"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/cache"
	"github.com/horizon-runmap/horizon/runtime/cpu"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// scopeBackend is the CPU backend as a backend.PrefillScope: it counts the
// scopes and the batched matmuls (T > 1) issued inside and outside one.
type scopeBackend struct {
	*cpu.Backend
	begins, ends, open, inside, outside int
}

func (s *scopeBackend) BeginPrefill() error { s.begins++; s.open++; return nil }
func (s *scopeBackend) EndPrefill() error   { s.ends++; s.open--; return nil }
func (s *scopeBackend) MatMul(dst, w, x, bias backend.Tensor, T int) error {
	switch {
	case T > 1 && s.open == 0:
		s.outside++
	case T > 1:
		s.inside++
	}
	return s.Backend.MatMul(dst, w, x, bias, T)
}

// TestPrefillScope: a batched prefill runs inside one BeginPrefill /
// EndPrefill pair a request (every batched matmul inside it, the decode
// steps after it), also when the prompt takes several chunks; token at a
// time opens none.
func TestPrefillScope(t *testing.T) {
	for _, c := range []struct {
		name    string
		prefill string
		chunk   int
		scopes  int
	}{
		{"batched", PrefillBatched, 0, 1},
		{"batched in chunks of 2", PrefillBatched, 2, 1},
		{"token", PrefillToken, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			be := &scopeBackend{Backend: cpu.New(1)}
			dev := cache.NewCPUDevice(be)
			l, err := Load(be, dev, testArtifact(t, "olmoe-tiny", qpack.SchemeInt4), LoadOptions{Executor: "grouped-v1", Prefill: c.prefill})
			if err != nil {
				t.Fatal(err)
			}
			defer dev.Close()
			defer l.Close()
			l.chunk = c.chunk
			for r := 1; r <= 2; r++ {
				if _, err := l.Generate(Request{Prompt: []int{3, 9, 27, 81, 5}, Tokens: 4, SuppressEOS: true}); err != nil {
					t.Fatal(err)
				}
				if be.begins != r*c.scopes || be.ends != r*c.scopes || be.open != 0 {
					t.Fatalf("after %d requests: %d begins, %d ends, %d open; want %d pairs", r, be.begins, be.ends, be.open, r*c.scopes)
				}
			}
			if c.scopes > 0 && be.inside == 0 {
				t.Fatal("no batched matmul inside the prefill's scope")
			}
			if be.outside != 0 {
				t.Fatalf("%d batched matmuls outside the prefill's scope", be.outside)
			}
		})
	}
}
