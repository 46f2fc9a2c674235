package fidelity

import (
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"
)

// TestTopIDs holds topIDs to the first k of a stable sort by descending
// logit (ties in the lower id's favour), on vocabularies with many ties.
func TestTopIDs(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 9))
	for _, tc := range []struct {
		name   string
		vocab  int
		levels int // distinct logit values: few levels, many ties
		k      int
	}{
		{"distinct", 1000, 1 << 30, 4},
		{"ties", 1000, 5, 4},
		{"all equal", 50, 1, 4},
		{"k is the vocabulary", 6, 3, 6},
		{"k 1", 300, 7, 1},
		{"wide k", 300, 20, 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for trial := range 20 {
				x := make([]float32, tc.vocab)
				for i := range x {
					x[i] = float32(r.IntN(tc.levels)) - float32(tc.levels)/2
				}
				ids := make([]int, len(x))
				for i := range ids {
					ids[i] = i
				}
				sort.SliceStable(ids, func(a, b int) bool { return x[ids[a]] > x[ids[b]] })
				if got, want := topIDs(x, tc.k), ids[:tc.k]; !reflect.DeepEqual(got, want) {
					t.Fatalf("trial %d: topIDs %v, the stable sort's first %d %v", trial, got, tc.k, want)
				}
			}
		})
	}
}

// TestCompareAll holds the parallel comparison to Compare one position
// after another, and its error to the lowest failing position's.
func TestCompareAll(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const n, vocab = 37, 500
	tokens := make([]int, n)
	ref, trt := make([][]float32, n), make([][]float32, n)
	for j := range n {
		tokens[j] = r.IntN(vocab)
		ref[j], trt[j] = make([]float32, vocab), make([]float32, vocab)
		for v := range vocab {
			ref[j][v] = float32(r.NormFloat64())
			trt[j][v] = ref[j][v] + float32(r.NormFloat64()*0.1)
		}
	}
	got, err := CompareAll(tokens, ref, trt, 4)
	if err != nil {
		t.Fatal(err)
	}
	for j := range n {
		want, err := Compare(j, tokens[j], ref[j], trt[j], 4)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got[j], want) {
			t.Fatalf("position %d: CompareAll %+v, Compare %+v", j, got[j], want)
		}
	}
	bad := append([][]float32(nil), trt...)
	bad[30] = []float32{1}
	bad[12] = []float32{1}
	if _, err := CompareAll(tokens, ref, bad, 4); err == nil || err.Error()[:12] != "position 12:" {
		t.Fatalf("two bad positions: error %v, want position 12's", err)
	}
	if _, err := CompareAll(tokens, ref[:5], trt, 4); err == nil {
		t.Fatal("fewer logit rows than tokens was accepted")
	}
}
