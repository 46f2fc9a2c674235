package report

import (
	"testing"

	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
)

// req is a measured request with N tokens at the given timestamps.
func req(h2d int64, ns ...int64) editions.Request {
	n := len(ns)
	return editions.Request{
		N: n, TokenIDs: make([]int, n), TokenNs: ns,
		TTFTSeconds: float64(ns[0]) / 1e9, DecodeSeconds: float64(ns[n-1]-ns[0]) / 1e9, RuntimeSeconds: float64(ns[n-1]) / 1e9,
		Cache: editions.RequestCache{H2DBytes: h2d, Misses: h2d / 10, Hits: 1,
			D2HExpertBytes: editions.Observed[int64](0), Writebacks: editions.Observed[int64](0),
			AuthorityWrites: editions.Observed[int64](0), RequestHashBytes: editions.Observed[int64](0),
			RequestArtifactReads: editions.UnknownObs[int64]()},
	}
}

func TestAggregate(t *testing.T) {
	c := &Campaign{Edition: "e", Device: "cpu"}
	cfg := &Configuration{ID: "x"}
	rec := func(block int, rss int64, reqs ...editions.Request) *editions.RawRecord {
		return &editions.RawRecord{ConfigID: "x", Block: block, Requests: reqs, Observations: editions.WorkerObservations{
			RSSPeakBytes: editions.Observed(rss), VRAMPeakBytes: editions.UnsupportedObs[int64](),
			VRAMProcessPeakBytes: editions.UnsupportedObs[int64](),
		}}
	}
	// Block 1: 3 tokens over 1 s of decode (2 decode tokens) and 4 tokens over 1 s.
	// Block 2: 3 tokens over 0.5 s of decode.
	d, err := Aggregate(c, &contracts.Contract{}, cfg, []*editions.RawRecord{
		rec(1, 100, req(10, 1e9, 1.5e9, 2e9), req(20, 2e9, 2.25e9, 2.5e9, 3e9)),
		rec(2, 300, req(30, 0.5e9, 0.75e9, 1e9)),
	})
	if err != nil {
		t.Fatal(err)
	}
	m := d.Metrics
	checks := []struct {
		name      string
		got, want float64
	}{
		{"decode tokens", float64(m.DecodeTokens), 2 + 3 + 2},
		{"decode seconds", m.DecodeSeconds, 1 + 1 + 0.5},
		{"pooled decode", m.PooledDecodeTokS.Value, 7 / 2.5},
		{"output tokens", float64(m.OutputTokens), 10},
		{"overall output", m.OverallOutputTokS, 10 / 6.0},
		{"TTFT mean", m.TTFTMeanS, (1 + 2 + 0.5) / 3},
		{"response mean", m.ResponseMeanS, 6.0 / 3},
		{"H2D", float64(m.H2DBytes), 60},
		{"spread min", m.BlockSpread.Min.Value, 5 / 2.0},
		{"spread max", m.BlockSpread.Max.Value, 2 / 0.5},
		{"RSS", float64(m.RSSPeakBytes.Value), 300},
	}
	for _, ck := range checks {
		if ck.got != ck.want {
			t.Errorf("%s = %v, want %v", ck.name, ck.got, ck.want)
		}
	}
	if m.VRAMPeakBytes.Status != editions.Unsupported {
		t.Errorf("VRAM %+v, want UNSUPPORTED", m.VRAMPeakBytes)
	}
	if d.Invariants.D2HExpertBytes != editions.Observed[int64](0) || d.Invariants.RequestArtifactReads.Status != editions.Unknown {
		t.Errorf("invariants %+v: observed zeros stay observed, one UNKNOWN request makes the sum UNKNOWN", d.Invariants)
	}
	if d.Requests != 3 || d.Blocks != 2 || len(d.Workers) != 2 || d.Workers[1] != "raw/x/block-2.json" {
		t.Errorf("requests %d, blocks %d, workers %v", d.Requests, d.Blocks, d.Workers)
	}
}

func TestObsCombine(t *testing.T) {
	n := editions.Observed[int64]
	u, x := editions.UnknownObs[int64](), editions.UnsupportedObs[int64]()
	cases := []struct {
		name     string
		in       []editions.Obs[int64]
		max, sum editions.Obs[int64]
	}{
		{"numbers", []editions.Obs[int64]{n(1), n(5), n(2)}, n(5), n(8)},
		{"one unknown", []editions.Obs[int64]{n(1), u}, u, u},
		{"all unsupported", []editions.Obs[int64]{x, x}, x, x},
		{"mixed unsupported", []editions.Obs[int64]{n(1), x}, u, u},
		{"none", nil, u, u},
	}
	for _, tc := range cases {
		if got := MaxObs(tc.in); got != tc.max {
			t.Errorf("%s: max %+v, want %+v", tc.name, got, tc.max)
		}
		if got := SumObs(tc.in); got != tc.sum {
			t.Errorf("%s: sum %+v, want %+v", tc.name, got, tc.sum)
		}
	}
}

func TestRound(t *testing.T) {
	cases := []struct {
		v    float64
		d    int
		want float64
	}{
		{510.4462530380129, 2, 510.45}, {2.5, 0, 3}, {-2.5, 0, -3}, {0.12345, 4, 0.1235}, {1234567, 0, 1234567},
	}
	for _, tc := range cases {
		if got := Round(tc.v, tc.d); got != tc.want {
			t.Errorf("Round(%v, %d) = %v, want %v", tc.v, tc.d, got, tc.want)
		}
	}
}
