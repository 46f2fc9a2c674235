package report

import (
	"slices"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
)

// With one output token per request there is no decode interval: the
// decode rate and block spread are UNKNOWN (never 0, never NaN), no decode
// claim is made, and each declared prompt length gets its prefill rate,
// claims and table row.
func TestAggregateOneToken(t *testing.T) {
	k, err := contracts.Embedded(contracts.PerfPrefillSmokeV1)
	if err != nil {
		t.Fatal(err)
	}
	obs := editions.WorkerObservations{RSSPeakBytes: editions.Observed[int64](1), VRAMPeakBytes: editions.UnsupportedObs[int64](),
		VRAMProcessPeakBytes: editions.UnsupportedObs[int64]()}
	var recs []*editions.RawRecord
	for b := 1; b <= k.Blocks; b++ {
		r := &editions.RawRecord{ConfigID: "x", Block: b, Observations: obs}
		for i, p := range k.Prompts {
			ns := int64(1e6 * (b + i + 1))
			pf := editions.Observed(float64(ns-1000) / 1e9)
			r.Requests = append(r.Requests, editions.Request{Index: i, PromptID: p.ID, PromptTokens: p.Tokens, PromptTokenIDs: make([]int, p.Tokens),
				N: 1, TokenIDs: []int{7}, TokenNs: []int64{ns}, TTFTSeconds: float64(ns) / 1e9, RuntimeSeconds: float64(ns) / 1e9, PrefillSeconds: &pf})
		}
		recs = append(recs, r)
	}
	c := &Campaign{Edition: "e", Device: "cpu", Evidence: "E1", Publication: "internal"}
	d, err := Aggregate(c, k, &Configuration{ID: "x"}, recs)
	if err != nil {
		t.Fatal(err)
	}
	m := d.Metrics
	unknown := editions.UnknownObs[float64]()
	if m.PooledDecodeTokS != unknown || m.BlockSpread.Min != unknown || m.BlockSpread.Max != unknown || d.Uncertainty != nil {
		t.Fatalf("decode %+v, spread %+v, uncertainty %v: want UNKNOWN and none", m.PooledDecodeTokS, m.BlockSpread, d.Uncertainty)
	}
	if len(m.PrefillLengths) != len(k.Prompts) {
		t.Fatalf("%d prefill lengths, want %d", len(m.PrefillLengths), len(k.Prompts))
	}
	for i, pl := range m.PrefillLengths {
		p := k.Prompts[i]
		var rates []float64
		for _, r := range recs {
			q := r.Requests[i]
			rates = append(rates, float64(p.Tokens)/q.PrefillSeconds.Value)
		}
		var sum float64
		for _, x := range rates {
			sum += x
		}
		slices.Sort(rates)
		switch {
		case pl.PromptID != p.ID || pl.PromptTokens != p.Tokens || pl.Requests != k.Blocks:
			t.Errorf("entry %d: %+v", i, pl)
		case pl.MeanTokS != editions.Observed(sum/float64(len(rates))) || pl.MedianTokS != editions.Observed(rates[1]):
			t.Errorf("%s: mean %v, median %v; want %v, %v", p.ID, pl.MeanTokS, pl.MedianTokS, sum/3, rates[1])
		case pl.Interval == nil || pl.Interval.Lo > pl.MeanTokS.Value || pl.Interval.Hi < pl.MeanTokS.Value || pl.Interval.Lo < rates[0] || pl.Interval.Hi > rates[2]:
			t.Errorf("%s: interval %+v around mean %v within %v", p.ID, pl.Interval, pl.MeanTokS, rates)
		}
	}
	cl := Claims(c, []editions.ConfigDoc{d})
	var ids []string
	for _, x := range cl.Claims {
		ids = append(ids, x.ID)
		if strings.Contains(x.ID, "pooled_decode") {
			t.Errorf("claim %s: no decode interval, no decode claim", x.ID)
		}
	}
	for _, p := range k.Prompts {
		for _, stat := range []string{"mean_tok_s", "median_tok_s"} {
			if id := "x.prefill_lengths." + p.ID + "." + stat; !slices.Contains(ids, id) {
				t.Errorf("no claim %s among %v", id, ids)
			}
		}
	}
	if tb := makePrefillTable([]editions.ConfigDoc{d}); len(tb.Rows) != len(k.Prompts) {
		t.Errorf("prefill table has %d rows", len(tb.Rows))
	}
	// An untimed request leaves its length UNKNOWN, with no interval and
	// no claim.
	recs[0].Requests[0].PrefillSeconds = &unknown
	d, err = Aggregate(c, k, &Configuration{ID: "x"}, recs)
	if err != nil {
		t.Fatal(err)
	}
	if pl := d.Metrics.PrefillLengths[0]; pl.MeanTokS != unknown || pl.MedianTokS != unknown || pl.Interval != nil {
		t.Errorf("untimed: %+v", pl)
	}
	if got := PrefillLengthClaims(&d, 0, d.Metrics.PrefillLengths[0], "E1", "internal"); got != nil {
		t.Errorf("claims of an untimed length: %v", got)
	}
}
