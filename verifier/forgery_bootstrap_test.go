package verifier

import (
	"encoding/json"
	"math"
	"strconv"
	"testing"

	"github.com/horizon-runmap/horizon/editions"
)

// Forgeries of the bootstrap-v1 uncertainty: everything else re-derived,
// the interval nudged by the smallest step a float64 has, or the declared
// seed changed under the written interval.
func init() {
	forgeries = append(forgeries,
		forgery{family: "recompute", name: "bootstrap upper bound of pooled decode raised by one ulp", want: IDRecomputeBootstrap,
			apply: func(t *testing.T, dir string) {
				forge(t, dir)
				editUncertainty(t, dir, func(u map[string]any) {
					iv := obj(t, u, "pooled_decode_tok_s")
					hi := numFloat(t, iv["hi"])
					iv["hi"] = json.Number(strconv.FormatFloat(math.Nextafter(hi, math.Inf(1)), 'g', -1, 64))
				})
				refreshClaimIntervals(t, dir) // the claim states the forged bound
				rehash(t, dir)
			}},
		forgery{family: "recompute", name: "bootstrap seed swapped under the written interval", want: IDRecomputeBootstrap,
			apply: func(t *testing.T, dir string) {
				forge(t, dir)
				editUncertainty(t, dir, func(u map[string]any) {
					u["seed"] = json.Number(strconv.FormatInt(numInt(t, u["seed"])+1, 10))
				})
				rehash(t, dir)
			}},
	)
}

// refreshClaimIntervals rewrites every claim interval's recorded bound
// values from their sources, as a forger who edited an uncertainty would.
func refreshClaimIntervals(t *testing.T, dir string) {
	t.Helper()
	edit(t, dir, editions.ClaimsFile, func(doc map[string]any) {
		claims, _ := doc["claims"].([]any)
		for _, c := range claims {
			if iv, ok := c.(map[string]any)["interval"].(map[string]any); ok {
				for _, k := range []string{"lo", "hi"} {
					ref := obj(t, iv, k)
					ref["value"] = sourceValue(t, dir, ref)
				}
			}
		}
	})
}

// editUncertainty edits the uncertainty of the first configuration that
// has one (the fixture's and re-aggregated editions' all do).
func editUncertainty(t *testing.T, dir string, f func(u map[string]any)) {
	t.Helper()
	for _, id := range configIDs(t, dir) {
		p := editions.ConfigPath(id)
		if _, ok := readTree(t, dir, p)["uncertainty"]; !ok {
			continue
		}
		edit(t, dir, p, func(d map[string]any) { f(obj(t, d, "uncertainty")) })
		return
	}
	t.Skip("no configuration carries an uncertainty")
}
