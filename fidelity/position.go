package fidelity

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/horizon-runmap/horizon/editions"
)

// Entry and Position are the per-position record (editions holds the
// document types).
type (
	Entry    = editions.FidelityEntry
	Position = editions.FidelityPosition
)

// ErrDistribution reports logits a position cannot be computed from.
var ErrDistribution = errors.New("fidelity: bad distribution")

// logSoftmax returns log-softmax(x) in float64 and the argmax (lowest id
// on a tie).
func logSoftmax(x []float32) ([]float64, int, error) {
	if len(x) == 0 {
		return nil, -1, fmt.Errorf("%w: no logits", ErrDistribution)
	}
	m, arg := math.Inf(-1), -1
	for i, v := range x {
		f := float64(v)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, -1, fmt.Errorf("%w: logit %d is %v", ErrDistribution, i, v)
		}
		if f > m {
			m, arg = f, i
		}
	}
	var s float64
	for _, v := range x {
		s += math.Exp(float64(v) - m)
	}
	lz := m + math.Log(s)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v) - lz
	}
	return out, arg, nil
}

// Compare computes position index from the two arms' logits over the same
// vocabulary; token is the reference's token there, k how many of the
// reference's top ids to keep.
func Compare(index, token int, ref, trt []float32, k int) (Position, error) {
	if len(ref) != len(trt) {
		return Position{}, fmt.Errorf("%w: %d reference logits, %d treatment logits", ErrDistribution, len(ref), len(trt))
	}
	if k < 1 || k > len(ref) {
		return Position{}, fmt.Errorf("%w: top-k %d of a vocabulary of %d", ErrDistribution, k, len(ref))
	}
	lr, ar, err := logSoftmax(ref)
	if err != nil {
		return Position{}, fmt.Errorf("reference: %w", err)
	}
	lt, at, err := logSoftmax(trt)
	if err != nil {
		return Position{}, fmt.Errorf("treatment: %w", err)
	}
	p := Position{Index: index, Token: token, RefArgmax: ar, TrtArgmax: at, Top1: ar == at}
	for v := range lr {
		p.KL += math.Exp(lr[v]) * (lr[v] - lt[v])
		p.MaxAbsLogitDiff = max(p.MaxAbsLogitDiff, math.Abs(float64(ref[v])-float64(trt[v])))
	}
	// Rounding can leave a KL of identical distributions a hair below 0.
	p.KL = max(p.KL, 0)
	ids := topIDs(ref, k)
	if !p.Top1 && !containsInt(ids, at) {
		ids = append(ids, at)
	}
	for _, v := range ids {
		p.Top = append(p.Top, Entry{ID: v, RefLogit: float64(ref[v]), TrtLogit: float64(trt[v]), RefLogProb: lr[v], TrtLogProb: lt[v]})
	}
	return p, nil
}

// topIDs is the k ids of the largest logits, largest first, a tie in the
// lower id's favour: the first k of a stable sort by descending logit, in
// one pass over the vocabulary (a sort of the whole vocabulary per
// position made a Qwen-vocabulary shard's comparisons take minutes).
func topIDs(logits []float32, k int) []int {
	ids := make([]int, 0, k)
	for v, x := range logits {
		if len(ids) == k && x <= logits[ids[k-1]] {
			continue
		}
		// After every kept id whose logit is >= x: equal logits keep their
		// id order.
		at := len(ids)
		for at > 0 && logits[ids[at-1]] < x {
			at--
		}
		if len(ids) < k {
			ids = append(ids, 0)
		}
		copy(ids[at+1:], ids[at:len(ids)-1])
		ids[at] = v
	}
	return ids
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Tolerance is the slack of CheckPosition's comparisons: stored values are
// float64 rounded through JSON, and the logits were float32.
const Tolerance = 1e-6

// KLBoundSlack is the absolute slack of CheckPosition's KL lower bound.
const KLBoundSlack = 1e-12

// CheckPosition checks a stored position for internal consistency against
// its own top entries, with k the contract's top-k. It cannot confirm KL,
// MaxAbsLogitDiff or the argmaxes beyond these bounds: the full
// distributions are not kept.
func CheckPosition(p Position, k int) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("position %d: %s", p.Index, fmt.Sprintf(format, args...))
	}
	switch {
	case len(p.Top) != k && len(p.Top) != k+1:
		return bad("%d top entries, want %d (or %d with the treatment's argmax)", len(p.Top), k, k+1)
	case p.Top[0].ID != p.RefArgmax:
		return bad("the reference's first top id is %d, its argmax %d", p.Top[0].ID, p.RefArgmax)
	case p.Top1 != (p.RefArgmax == p.TrtArgmax):
		return bad("top1 %v with argmaxes %d and %d", p.Top1, p.RefArgmax, p.TrtArgmax)
	case !(p.KL >= 0) || math.IsInf(p.KL, 0):
		return bad("KL %v", p.KL)
	case !(p.MaxAbsLogitDiff >= 0) || math.IsInf(p.MaxAbsLogitDiff, 0):
		return bad("max |logit diff| %v", p.MaxAbsLogitDiff)
	}
	extra := len(p.Top) == k+1
	if extra && (p.Top1 || p.Top[k].ID != p.TrtArgmax) {
		return bad("an extra top entry %d, but the treatment's argmax is %d (top1 %v)", p.Top[k].ID, p.TrtArgmax, p.Top1)
	}
	if trtArgmaxEntry(p) < 0 {
		return bad("the treatment's argmax %d is not among the top entries", p.TrtArgmax)
	}
	var refMass, trtMass, klIn, worst float64
	refZ, trtZ := p.Top[0].RefLogit-p.Top[0].RefLogProb, p.Top[0].TrtLogit-p.Top[0].TrtLogProb
	seen := map[int]bool{}
	for i, e := range p.Top {
		if seen[e.ID] {
			return bad("top id %d twice", e.ID)
		}
		seen[e.ID] = true
		if e.RefLogProb > Tolerance || e.TrtLogProb > Tolerance {
			return bad("top id %d: log-probabilities %v, %v above 0", e.ID, e.RefLogProb, e.TrtLogProb)
		}
		if math.Abs(e.RefLogit-e.RefLogProb-refZ) > 1e-4 || math.Abs(e.TrtLogit-e.TrtLogProb-trtZ) > 1e-4 {
			return bad("top id %d: logit less log-probability is not one constant per arm", e.ID)
		}
		if i > 0 && i < k && e.RefLogit > p.Top[i-1].RefLogit {
			return bad("top ids not in descending reference logit order at %d", i)
		}
		if e.TrtLogit > p.Top[trtArgmaxEntry(p)].TrtLogit+1e-6 {
			return bad("top id %d has a higher treatment logit than the treatment's argmax %d", e.ID, p.TrtArgmax)
		}
		worst = max(worst, math.Abs(e.RefLogit-e.TrtLogit))
		if i < k {
			refMass += math.Exp(e.RefLogProb)
			trtMass += math.Exp(e.TrtLogProb)
			klIn += math.Exp(e.RefLogProb) * (e.RefLogProb - e.TrtLogProb)
		}
	}
	if worst > p.MaxAbsLogitDiff*(1+1e-6)+1e-5 {
		return bad("max |logit diff| %v below %v, the difference at a stored id", p.MaxAbsLogitDiff, worst)
	}
	// KL over the partition {top-k, rest} bounds the full KL below.
	lb := klIn
	if restR, restT := 1-refMass, 1-trtMass; restR > 1e-12 && restT > 1e-12 {
		lb += restR * math.Log(restR/restT)
	}
	// The stored log-probabilities are the very float64 values Compare
	// summed the KL from (JSON keeps a float64 exactly), so the bound holds
	// to float64 rounding: ~1e-15 here, far inside this slack. A looser
	// slack (1e-5) let a KL of 0 pass on fidelity-v1, whose nearly flat
	// distributions give bounds of 5e-9 to 1.7e-5.
	if lb > p.KL+KLBoundSlack+1e-9*p.KL {
		return bad("KL %v below %v, the KL of its stored top-%d and the rest", p.KL, lb, k)
	}
	return nil
}

// trtArgmaxEntry is the index in Top of the treatment's argmax (it is
// there: the reference's argmax when they agree, a top-k id, or the extra
// entry); -1 when it is not.
func trtArgmaxEntry(p Position) int {
	for i, e := range p.Top {
		if e.ID == p.TrtArgmax {
			return i
		}
	}
	return -1
}

// FirstDivergence is the first index where two free-running token
// sequences differ: the first unequal id, or the shorter length when one
// is a prefix of the other; ok is false when they are identical.
func FirstDivergence(ref, trt []int) (int, bool) {
	n := min(len(ref), len(trt))
	for i := 0; i < n; i++ {
		if ref[i] != trt[i] {
			return i, true
		}
	}
	if len(ref) != len(trt) {
		return n, true
	}
	return 0, false
}

// CompareAll is Compare at every position of one teacher-forced response:
// tokens[j] is the reference's token at position j, ref[j] and trt[j] the
// arms' logits there. The positions are independent, so they are computed
// on up to GOMAXPROCS goroutines; the result is the same as one Compare
// after another (each position's own arithmetic is unchanged), and the
// first failing position's error (lowest index) is returned.
func CompareAll(tokens []int, ref, trt [][]float32, k int) ([]Position, error) {
	n := len(tokens)
	if len(ref) < n || len(trt) < n {
		return nil, fmt.Errorf("%w: %d positions, %d reference and %d treatment logit rows", ErrDistribution, n, len(ref), len(trt))
	}
	out := make([]Position, n)
	errs := make([]error, n)
	workers := min(runtime.GOMAXPROCS(0), n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := int(next.Add(1) - 1); j < n; j = int(next.Add(1) - 1) {
				out[j], errs[j] = Compare(j, tokens[j], ref[j], trt[j], k)
			}
		}()
	}
	wg.Wait()
	for j, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("position %d: %w", j, err)
		}
	}
	return out, nil
}
