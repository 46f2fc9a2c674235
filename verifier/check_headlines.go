package verifier

import (
	"fmt"
	"html"
	"math"
	"regexp"
	"strconv"

	"github.com/horizon-runmap/horizon/editions"
)

// The headline sentences of report.html (one per model, under the title:
// each configuration's pooled decode or prefill rate, its ratio to the
// model's largest capacity, TTFT, H2D, and on cuda its share of the HBM
// ceiling) are derived text too. Check derived recomputes them with
// editions.Headlines, the runner's function, from the configuration
// documents in campaign order (recomputed from raw by check recompute) and
// the HBM ceilings package ceilings computes from the raw records (as the
// runner does), and compares them sentence by sentence, HBM clauses
// included. Where the ceilings cannot be computed (the raw records do not
// load for them), the clause ", X% of the HBM ceiling (Y tok/s)" is taken
// out of both before they are compared, and X is checked against the
// configuration's pooled decode rate over the Y the sentence states; Y is
// then unverified. A report without the list is not an error: it then
// states no headline to be misled by.
var IDDerivedHeadline = def("derived", "derived.headline", Error, "a report's headline sentences differ from the ones recomputed from the configuration documents, or a sentence's share of the HBM ceiling is not its pooled decode rate over the ceiling it states")

var (
	htmlHeadlineList = regexp.MustCompile(`(?s)<ul class="headline">(.*?)</ul>`)
	htmlHeadlineItem = regexp.MustCompile(`(?s)<li>(.*?)</li>`)
	// headlineHBM is the HBM clause of one configuration in a sentence:
	// its id, then the share (%) and the ceiling (tok/s).
	headlineHBM = regexp.MustCompile(`(\S+) \(\d+/\d+ experts\): [0-9.]+ tok/s(, (\d+)% of the HBM ceiling \((\d+) tok/s\))`)
)

// checkReportHeadlines compares report.html's headline list with the
// recomputed sentences. An edition whose documents are not all readable
// is left to the checks that report that.
func checkReportHeadlines(v *view, rf reportFormat, text string, rc *ceilingsRecompute, fs *findings) {
	if rf.file != editions.ReportHTML {
		return // report.md has no headline list
	}
	m := htmlHeadlineList.FindStringSubmatch(text)
	if m == nil {
		return
	}
	declared, ok := campaignConfigs(v.e.docs[editions.CampaignFile])
	if !ok {
		return
	}
	var docs []editions.ConfigDoc
	byID := map[string]*editions.ConfigDoc{}
	for _, cc := range declared {
		c := v.byID[cc.id]
		if c == nil || c.doc == nil {
			return
		}
		docs = append(docs, *c.doc)
		byID[cc.id] = c.doc
	}
	hbm, exact := rc.hbm()
	if !exact {
		hbm = nil
	}
	want := editions.Headlines(docs, hbm)
	var got []string
	for _, it := range htmlHeadlineItem.FindAllStringSubmatch(m[1], -1) {
		s := html.UnescapeString(it[1])
		if exact {
			got = append(got, s)
			continue
		}
		for _, c := range headlineHBM.FindAllStringSubmatch(s, -1) {
			if msg := hbmClauseError(byID[c[1]], c[1], c[3], c[4]); msg != "" {
				fs.add(IDDerivedHeadline, rf.file, "", "a share equal to the pooled decode rate over the stated ceiling", c[2], "%s", msg)
				return
			}
		}
		// The sentence as editions.Headlines writes it without ceilings.
		got = append(got, headlineHBM.ReplaceAllStringFunc(s, func(x string) string {
			return x[:len(x)-len(headlineHBM.FindStringSubmatch(x)[2])]
		}))
	}
	if i, g, w, ok := firstDifference(got, want); ok {
		fs.add(IDDerivedHeadline, rf.file, "", w, g, "%s's headline sentence %d differs from the one recomputed from the configuration documents", rf.file, i+1)
	}
}

// hbmClauseError says what is wrong with a configuration's HBM clause
// (share pct of a ceiling ceil, both as printed), "" when the share is its
// pooled decode rate over the ceiling (to the printed precision: the
// runner divides by the unrounded ceiling).
func hbmClauseError(d *editions.ConfigDoc, id, pct, ceil string) string {
	if d == nil {
		return fmt.Sprintf("the headline gives an HBM ceiling for %s, which is not a configuration of the campaign", id)
	}
	x, err1 := strconv.ParseFloat(pct, 64)
	y, err2 := strconv.ParseFloat(ceil, 64)
	pd := d.Metrics.PooledDecodeTokS
	if err1 != nil || err2 != nil || y <= 0 || !pd.Ok() {
		return fmt.Sprintf("%s's HBM clause (%s%% of %s tok/s) cannot be checked against a pooled decode rate", id, pct, ceil)
	}
	share := 100 * pd.Value / y
	// x rounds the share over the unrounded ceiling (y ± 0.5).
	if tol := 0.5 + 50*pd.Value/(y*y) + 1e-9; math.Abs(x-share) > tol {
		return fmt.Sprintf("%s's headline says %s%% of an HBM ceiling of %s tok/s, but its pooled decode %.1f tok/s is %.1f%% of it", id, pct, ceil, pd.Value, share)
	}
	return ""
}
