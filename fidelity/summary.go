package fidelity

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/stat"

	"github.com/horizon-runmap/horizon/editions"
)

// Bootstrap settings of a summary: Resamples percentile-bootstrap
// resamples at Level, drawn from PCG(Seed, stream) where stream is
// FNV-1a-64 of the summary's name, so every summary of an edition draws
// its own reproducible index sequence.
type Bootstrap editions.FidelityBootstrap

// The summary types (editions holds the document types). Summary is a
// sample's median, p90 and max (stat.Empirical quantiles, gonum's
// definition: the smallest value with at least that fraction of the sample
// at or below it), each with its interval; Rate a fraction of flags.
type (
	Interval = editions.FidelityInterval
	Stat     = editions.FidelityStat
	Summary  = editions.FidelitySummary
	Rate     = editions.FidelityRate
)

// stream is the PCG stream of a named summary.
func stream(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return h.Sum64()
}

func quantiles(sorted []float64) (med, p90, mx float64) {
	return stat.Quantile(0.5, stat.Empirical, sorted, nil), stat.Quantile(0.9, stat.Empirical, sorted, nil), sorted[len(sorted)-1]
}

// interval is the percentile interval of level over the resampled values
// (sorted in place).
func (b Bootstrap) interval(v []float64) Interval {
	slices.Sort(v)
	a := (1 - b.Level) / 2
	return Interval{Lo: stat.Quantile(a, stat.Empirical, v, nil), Hi: stat.Quantile(1-a, stat.Empirical, v, nil)}
}

// Validate checks the settings.
func (b Bootstrap) Validate() error {
	if b.Resamples < 1 || !(b.Level > 0 && b.Level < 1) {
		return fmt.Errorf("bootstrap: %d resamples at level %v: want at least 1 and a level in (0, 1)", b.Resamples, b.Level)
	}
	return nil
}

// Summarize summarises clusters of values (a prompt's positions are one
// cluster): the statistics are over all values pooled, and each resample
// draws len(clusters) clusters with replacement and pools their values, so
// the interval keeps the dependence within a cluster. A single cluster
// (one prompt's summary) is resampled value by value instead. ok is false
// when there is no value.
func (b Bootstrap) Summarize(name string, clusters [][]float64) (Summary, bool) {
	var all []float64
	for _, c := range clusters {
		all = append(all, c...)
	}
	if len(all) == 0 {
		return Summary{}, false
	}
	if len(clusters) == 1 {
		clusters = make([][]float64, len(all))
		for i, v := range all {
			clusters[i] = []float64{v}
		}
	}
	s := Summary{N: len(all)}
	sorted := slices.Sorted(slices.Values(all))
	s.Median.Value, s.P90.Value, s.Max.Value = quantiles(sorted)
	r := rand.New(rand.NewPCG(b.Seed, stream(name)))
	med, p90, mx := make([]float64, b.Resamples), make([]float64, b.Resamples), make([]float64, b.Resamples)
	var pool []float64
	for i := range b.Resamples {
		pool = pool[:0]
		for range clusters {
			pool = append(pool, clusters[r.IntN(len(clusters))]...)
		}
		if len(pool) == 0 { // every drawn cluster was empty
			pool = append(pool, all...)
		}
		slices.Sort(pool)
		med[i], p90[i], mx[i] = quantiles(pool)
	}
	s.Median.CI, s.P90.CI, s.Max.CI = b.interval(med), b.interval(p90), b.interval(mx)
	return s, true
}

// RateOf is the fraction of true flags over clusters, with a bootstrap
// interval drawn as Summarize draws. ok is false when there is no flag.
func (b Bootstrap) RateOf(name string, clusters [][]bool) (Rate, bool) {
	fc := make([][]float64, len(clusters))
	var n int
	var hits float64
	for i, c := range clusters {
		for _, f := range c {
			v := 0.0
			if f {
				v = 1
			}
			fc[i] = append(fc[i], v)
			hits += v
			n++
		}
	}
	if n == 0 {
		return Rate{}, false
	}
	if len(fc) == 1 {
		one := fc[0]
		fc = make([][]float64, len(one))
		for i, v := range one {
			fc[i] = []float64{v}
		}
	}
	r := rand.New(rand.NewPCG(b.Seed, stream(name)))
	means := make([]float64, b.Resamples)
	for i := range b.Resamples {
		var s float64
		var m int
		for range fc {
			c := fc[r.IntN(len(fc))]
			for _, v := range c {
				s += v
			}
			m += len(c)
		}
		if m == 0 {
			means[i] = hits / float64(n)
			continue
		}
		means[i] = s / float64(m)
	}
	return Rate{N: n, Value: Stat{Value: hits / float64(n), CI: b.interval(means)}}, true
}
