package fidelity

import (
	"fmt"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/horizon-runmap/horizon/editions"
)

// Outcome is a prompt's (or an instruction's) paired verdict.
type Outcome string

// Paired outcomes: the reference arm's verdict first.
const (
	BothPass    Outcome = "both_pass"
	BothFail    Outcome = "both_fail"
	Regression  Outcome = "regression"  // reference passes, treatment fails
	Improvement Outcome = "improvement" // reference fails, treatment passes
)

// Outcomes lists the outcomes in report order.
var Outcomes = []Outcome{BothPass, BothFail, Regression, Improvement}

// Classify pairs one reference verdict with one treatment verdict.
func Classify(ref, trt bool) Outcome {
	switch {
	case ref && trt:
		return BothPass
	case ref:
		return Regression
	case trt:
		return Improvement
	}
	return BothFail
}

// Counts are paired outcomes counted over prompts or instructions.
type Counts = editions.FidelityCounts

// Count counts one outcome into c.
func Count(c *Counts, o Outcome) {
	switch o {
	case BothPass:
		c.BothPass++
	case BothFail:
		c.BothFail++
	case Regression:
		c.Regression++
	case Improvement:
		c.Improvement++
	default:
		panic(fmt.Sprintf("fidelity: outcome %q", o))
	}
	c.Total++
}

// Of returns c's count of one outcome.
func Of(c Counts, o Outcome) int {
	switch o {
	case BothPass:
		return c.BothPass
	case BothFail:
		return c.BothFail
	case Regression:
		return c.Regression
	case Improvement:
		return c.Improvement
	}
	return 0
}

// McNemar is the exact McNemar test of the discordant pairs: under the
// null hypothesis a discordant pair is a regression or an improvement with
// probability 1/2 each, so the regressions are Binomial(n, 1/2) with n the
// discordant pairs. P is the two-sided p-value, min(1, 2 P(X <= min(b,
// c))); with no discordant pair there is no test and ok is false (the
// edition shows UNKNOWN, not a p-value).
func McNemar(regressions, improvements int) (p float64, ok bool) {
	n := regressions + improvements
	if regressions < 0 || improvements < 0 || n == 0 {
		return 0, false
	}
	b := distuv.Binomial{N: float64(n), P: 0.5}
	return min(1, 2*b.CDF(float64(min(regressions, improvements)))), true
}
