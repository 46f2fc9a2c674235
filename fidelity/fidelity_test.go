package fidelity

import (
	"math"
	"math/rand"
	"testing"
)

func TestPairAndMcNemar(t *testing.T) {
	for _, c := range []struct {
		ref, trt bool
		want     Outcome
	}{{true, true, BothPass}, {false, false, BothFail}, {true, false, Regression}, {false, true, Improvement}} {
		if got := Classify(c.ref, c.trt); got != c.want {
			t.Errorf("Classify(%v, %v) = %s, want %s", c.ref, c.trt, got, c.want)
		}
	}
	cases := []struct {
		name   string
		b, c   int
		want   float64
		wantOK bool
	}{
		{"no discordant pair", 0, 0, 0, false},
		{"seed's 8 against 7", 8, 7, 1, true},
		{"six regressions", 6, 0, 2.0 / 64, true},
		{"one of each side small", 1, 9, 2 * 11.0 / 1024, true},
		{"symmetric", 9, 1, 2 * 11.0 / 1024, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, ok := McNemar(c.b, c.c)
			if ok != c.wantOK || math.Abs(p-c.want) > 1e-12 {
				t.Fatalf("McNemar(%d, %d) = %v, %v; want %v, %v", c.b, c.c, p, ok, c.want, c.wantOK)
			}
		})
	}
}

func TestCompare(t *testing.T) {
	ref := []float32{2, 1, 0, -1}
	p, err := Compare(3, 1, ref, ref, 2)
	if err != nil {
		t.Fatal(err)
	}
	if p.KL != 0 || !p.Top1 || p.MaxAbsLogitDiff != 0 || len(p.Top) != 2 || p.Top[0].ID != 0 || p.Top[1].ID != 1 {
		t.Fatalf("identical arms: %+v", p)
	}
	if err := CheckPosition(p, 2); err != nil {
		t.Fatal(err)
	}
	trt := []float32{0, 1, 2.5, -1}
	q, err := Compare(0, 0, ref, trt, 2)
	if err != nil {
		t.Fatal(err)
	}
	// KL by hand.
	lr, _, _ := logSoftmax(ref)
	lt, _, _ := logSoftmax(trt)
	var kl float64
	for i := range lr {
		kl += math.Exp(lr[i]) * (lr[i] - lt[i])
	}
	if math.Abs(q.KL-kl) > 1e-12 || q.Top1 || q.TrtArgmax != 2 || q.MaxAbsLogitDiff != 2.5 || len(q.Top) != 3 || q.Top[2].ID != 2 {
		t.Fatalf("shifted arms: %+v (KL by hand %v)", q, kl)
	}
	if err := CheckPosition(q, 2); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		name string
		edit func(*Position)
	}{
		{"KL below the partition bound", func(p *Position) { p.KL /= 10 }},
		{"negative KL", func(p *Position) { p.KL = -1 }},
		{"flipped top1", func(p *Position) { p.Top1 = !p.Top1 }},
		{"max diff below a stored difference", func(p *Position) { p.MaxAbsLogitDiff = 1 }},
		{"log-probabilities off their logits", func(p *Position) { p.Top[1].RefLogProb -= 0.5 }},
		{"argmax not first", func(p *Position) { p.RefArgmax = 1 }},
		{"treatment argmax missing", func(p *Position) { p.Top = p.Top[:2] }},
	} {
		t.Run(bad.name, func(t *testing.T) {
			c := q
			c.Top = append([]Entry(nil), q.Top...)
			bad.edit(&c)
			if err := CheckPosition(c, 2); err == nil {
				t.Fatal("CheckPosition accepted it")
			}
		})
	}
	if _, err := Compare(0, 0, ref, []float32{1, float32(math.NaN()), 0, 0}, 2); err == nil {
		t.Fatal("a NaN logit was accepted")
	}
}

// TestCheckPositionFlat holds the KL bound on nearly flat distributions
// over a large vocabulary, as a synthetic checkpoint gives them
// (editions/fidelity-v1: top-4 mass ~0.002, bounds 5e-9 to 1.7e-5): the
// honest position passes, a KL of 0 does not. (A tenth of the true KL still
// lies above such a bound: that much is beyond what the stored top-k can
// refute, which the fidelity.partial hint says.)
func TestCheckPositionFlat(t *testing.T) {
	for _, c := range []struct {
		seed  int64
		vocab int
		noise float64 // the treatment's logit perturbation
	}{{1, 50304, 0.05}, {2, 151936, 0.05}, {3, 50304, 0.01}} {
		rng := rand.New(rand.NewSource(c.seed))
		ref, trt := make([]float32, c.vocab), make([]float32, c.vocab)
		for i := range ref {
			ref[i] = float32(rng.NormFloat64())
			trt[i] = ref[i] + float32(c.noise*rng.NormFloat64())
		}
		p, err := Compare(0, 0, ref, trt, 4)
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckPosition(p, 4); err != nil {
			t.Fatalf("seed %d: the honest position: %v", c.seed, err)
		}
		f := p
		f.KL = 0
		if err := CheckPosition(f, 4); err == nil {
			t.Errorf("seed %d, vocab %d: KL 0 (true %g) passed", c.seed, c.vocab, p.KL)
		}
	}
}

func TestFirstDivergence(t *testing.T) {
	for _, c := range []struct {
		name     string
		ref, trt []int
		at       int
		diverged bool
	}{
		{"identical", []int{1, 2, 3}, []int{1, 2, 3}, 0, false},
		{"differs at 1", []int{1, 2, 3}, []int{1, 4, 3}, 1, true},
		{"prefix", []int{1, 2}, []int{1, 2, 3}, 2, true},
		{"first token", []int{5}, []int{6}, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			at, ok := FirstDivergence(c.ref, c.trt)
			if at != c.at || ok != c.diverged {
				t.Fatalf("got %d, %v; want %d, %v", at, ok, c.at, c.diverged)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	b := Bootstrap{Resamples: 200, Seed: 7, Level: 0.95}
	clusters := [][]float64{{1, 2, 3}, {4, 5}, {10}}
	s, ok := b.Summarize("x", clusters)
	if !ok || s.N != 6 || s.Median.Value != 3 || s.P90.Value != 10 || s.Max.Value != 10 {
		t.Fatalf("%+v", s)
	}
	again, _ := b.Summarize("x", clusters)
	if again != s {
		t.Fatal("the same seed and name gave another summary")
	}
	for _, st := range []Stat{s.Median, s.P90, s.Max} {
		if st.CI.Lo > st.CI.Hi || st.CI.Hi > 10 || st.CI.Lo < 1 {
			t.Fatalf("interval %+v", st.CI)
		}
	}
	if _, ok := b.Summarize("x", [][]float64{{}, {}}); ok {
		t.Fatal("an empty sample summarised")
	}
	r, ok := b.RateOf("y", [][]bool{{true, false}, {true}})
	if !ok || r.N != 3 || math.Abs(r.Value.Value-2.0/3) > 1e-12 || r.Value.CI.Lo > r.Value.CI.Hi {
		t.Fatalf("%+v", r)
	}
}
