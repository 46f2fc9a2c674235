package report

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
)

// bootRecs is two blocks of six requests with irregular token counts,
// decode times and TTFTs.
func bootRecs() []*editions.RawRecord {
	var recs []*editions.RawRecord
	for b := 1; b <= 2; b++ {
		r := &editions.RawRecord{ConfigID: "x", Block: b}
		for i := range 6 {
			r.Requests = append(r.Requests, editions.Request{
				Index: i, N: 3 + (i*7+b)%5, DecodeSeconds: float64((b*5+i*3)%7+2) / 8,
				TTFTSeconds: float64(10+(b*11+i*7)%13) / 1e3, RuntimeSeconds: 2,
			})
		}
		recs = append(recs, r)
	}
	return recs
}

// TestUncertaintyGolden pins bootstrap-v1's output: the interval is part of
// the edition contract, so any change to the draw order, the index mapping
// or the quantile rule shows here (and needs a new algorithm id). The seed
// and the configuration id (the PCG stream) each change the interval.
func TestUncertaintyGolden(t *testing.T) {
	for _, tc := range []struct {
		name   string
		id     string
		seed   uint64
		pooled editions.Interval
		ttft   editions.Interval
	}{
		{"default seed", "x", 20, editions.Interval{Lo: 4.526315789473684, Hi: 7.68}, editions.Interval{Lo: 0.014833333333333337, Hi: 0.01875}},
		{"other seed", "x", 21, editions.Interval{Lo: 4.493150684931507, Hi: 7.703703703703703}, editions.Interval{Lo: 0.014833333333333337, Hi: 0.01883333333333333}},
		{"other configuration", "y", 20, editions.Interval{Lo: 4.588235294117647, Hi: 7.5636363636363635}, editions.Interval{Lo: 0.014916666666666668, Hi: 0.01875}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := Uncertainty(tc.id, tc.seed, bootRecs())
			if u == nil {
				t.Fatal("no uncertainty")
			}
			if u.Algorithm != editions.BootstrapV1 || u.Resamples != 2000 || u.Seed != tc.seed || u.Level != 0.95 ||
				u.Quantiles != editions.QuantilesEmpiricalV1 {
				t.Errorf("declared terms: %+v", u)
			}
			if u.PooledDecodeTokS != tc.pooled {
				t.Errorf("pooled decode interval %+v, want %+v", u.PooledDecodeTokS, tc.pooled)
			}
			if u.TTFTMeanS != tc.ttft {
				t.Errorf("TTFT mean interval %+v, want %+v", u.TTFTMeanS, tc.ttft)
			}
			// Deterministic: the same inputs give the same bits.
			if again := Uncertainty(tc.id, tc.seed, bootRecs()); *again != *u {
				t.Errorf("second run differs: %+v", again)
			}
		})
	}
}

// TestUncertaintyContainsPoint: each interval holds its point estimate for
// these data, and lies within the per-request range.
func TestUncertaintyContainsPoint(t *testing.T) {
	recs := bootRecs()
	d, err := Aggregate(&Campaign{Edition: "e", Device: "cpu"}, &contracts.Contract{}, &Configuration{ID: "x"}, recs)
	if err != nil {
		t.Fatal(err)
	}
	u := d.Uncertainty
	if u == nil {
		t.Fatal("Aggregate wrote no uncertainty")
	}
	if *u != *Uncertainty("x", DefaultBootstrapSeed, recs) {
		t.Errorf("Aggregate's uncertainty is not Uncertainty(id, DefaultBootstrapSeed, recs)")
	}
	m := d.Metrics
	if pd := m.PooledDecodeTokS.Value; !(u.PooledDecodeTokS.Lo <= pd && pd <= u.PooledDecodeTokS.Hi) {
		t.Errorf("pooled decode %v outside %+v", m.PooledDecodeTokS, u.PooledDecodeTokS)
	}
	if !(u.TTFTMeanS.Lo <= m.TTFTMeanS && m.TTFTMeanS <= u.TTFTMeanS.Hi) {
		t.Errorf("TTFT mean %v outside %+v", m.TTFTMeanS, u.TTFTMeanS)
	}
}

// TestUncertaintyQuantiles checks the per-request percentiles against the
// empirical rule written out: the p-quantile of n sorted values is the
// value at index ceil(p*n)-1.
func TestUncertaintyQuantiles(t *testing.T) {
	recs := bootRecs()
	var rate, ttft []float64
	for _, r := range recs {
		for _, q := range r.Requests {
			rate = append(rate, float64(q.N-1)/q.DecodeSeconds)
			ttft = append(ttft, q.TTFTSeconds)
		}
	}
	sort.Float64s(rate)
	sort.Float64s(ttft)
	at := func(xs []float64, p float64) float64 { return xs[int(math.Ceil(p*float64(len(xs))))-1] }
	u := Uncertainty("x", DefaultBootstrapSeed, recs)
	for _, tc := range []struct {
		name      string
		got, want float64
	}{
		{"decode p50", u.RequestDecodeTok.P50, at(rate, 0.5)},
		{"decode p90", u.RequestDecodeTok.P90, at(rate, 0.9)},
		{"decode p99", u.RequestDecodeTok.P99, at(rate, 0.99)},
		{"ttft p50", u.RequestTTFTS.P50, at(ttft, 0.5)},
		{"ttft p90", u.RequestTTFTS.P90, at(ttft, 0.9)},
		{"ttft p99", u.RequestTTFTS.P99, at(ttft, 0.99)},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

func TestUncertaintyUndefined(t *testing.T) {
	for _, tc := range []struct {
		name string
		recs []*editions.RawRecord
	}{
		{"no requests", []*editions.RawRecord{{ConfigID: "x", Block: 1}}},
		{"a request without decode time", func() []*editions.RawRecord {
			r := bootRecs()
			r[1].Requests[2].DecodeSeconds = 0
			return r
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if u := Uncertainty("x", 1, tc.recs); u != nil {
				t.Errorf("want none, got %+v", u)
			}
		})
	}
}

// TestUncertaintySingleRequest: one request resamples to itself.
func TestUncertaintySingleRequest(t *testing.T) {
	u := Uncertainty("x", 7, []*editions.RawRecord{{Requests: []editions.Request{{N: 5, DecodeSeconds: 0.5, TTFTSeconds: 0.25}}}})
	one := editions.Interval{Lo: 8, Hi: 8}
	if u.PooledDecodeTokS != one || u.TTFTMeanS != (editions.Interval{Lo: 0.25, Hi: 0.25}) ||
		u.RequestDecodeTok != (editions.Percentiles{P50: 8, P90: 8, P99: 8}) {
		t.Errorf("%+v", u)
	}
}

// TestResultFieldsUncertainty: editions made before bootstrap-v1 (and
// before prefill_seconds: smoke-cuda's documents without those blocks) keep
// their columns; records aggregated now show the interval columns right
// after their point values, in the table and the JSON export alike.
func TestResultFieldsUncertainty(t *testing.T) {
	old := loadConfigs(t, "smoke-cuda")
	for i := range old {
		old[i].Uncertainty, old[i].Metrics.Prefill = nil, nil
	}
	if got := resultFields(old); len(got) != len(configFields) {
		t.Fatalf("an edition without uncertainty gets %d columns, want configFields' %d", len(got), len(configFields))
	}
	in, _ := loadEdition(t, "smoke-cpu")
	_, docs := aggregateEdition(t, in)
	tab := makeTable(resultFields(docs), docs)
	col := func(h string) int {
		for j, x := range tab.Headers {
			if x == h {
				return j
			}
		}
		t.Fatalf("no column %q in %q", h, tab.Headers)
		return -1
	}
	if p, ci := col("pooled decode (tok/s)"), col("pooled decode 95% CI (tok/s)"); ci != p+1 {
		t.Errorf("pooled decode CI at column %d, want %d", ci, p+1)
	}
	if p, ci := col("TTFT mean (ms)"), col("TTFT mean 95% CI (ms)"); ci != p+1 {
		t.Errorf("TTFT CI at column %d, want %d", ci, p+1)
	}
	u := docs[0].Uncertainty
	if got, want := tab.Rows[0][col("pooled decode 95% CI (tok/s)")], fmt.Sprintf("%.2f-%.2f", u.PooledDecodeTokS.Lo, u.PooledDecodeTokS.Hi); got != want {
		t.Errorf("pooled decode CI cell %q, want %q", got, want)
	}
	if got, want := tab.Rows[0][col("TTFT mean 95% CI (ms)")], fmt.Sprintf("%.1f-%.1f", u.TTFTMeanS.Lo*1e3, u.TTFTMeanS.Hi*1e3); got != want {
		t.Errorf("TTFT CI cell %q, want %q", got, want)
	}
	var b strings.Builder
	if err := resultsJSONL(&b, docs); err != nil {
		t.Fatal(err)
	}
	var o map[string]any
	if err := json.Unmarshal([]byte(strings.SplitN(b.String(), "\n", 2)[0]), &o); err != nil {
		t.Fatal(err)
	}
	if iv, ok := o["pooled_decode_ci95_tok_s"].(map[string]any); !ok || iv["lo"] != u.PooledDecodeTokS.Lo || iv["hi"] != u.PooledDecodeTokS.Hi {
		t.Errorf("jsonl pooled_decode_ci95_tok_s = %v, want %+v", o["pooled_decode_ci95_tok_s"], u.PooledDecodeTokS)
	}
}
