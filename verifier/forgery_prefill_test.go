package verifier

import (
	"encoding/json"
	"strconv"
	"testing"
)

func init() {
	forgeries = append(forgeries,
		forgery{family: "physics", name: "one request's prefill stretched past its first token", want: IDContractPrefill, apply: forgePrefillPastTTFT},
	)
}

// forgePrefillPastTTFT raises the first timed request's prefill_seconds to
// twice its ttft_seconds (lowering the edition's prefill rate, or raising it
// when halved instead would pass): every aggregate and claim re-derived,
// only the boundary prefill <= TTFT is left to notice. Editions whose
// records predate prefill_seconds skip.
func forgePrefillPastTTFT(t *testing.T, dir string) {
	for _, id := range configIDs(t, dir) {
		paths, docs := rawTrees(t, dir, id)
		for i, d := range docs {
			reqs, _ := d["requests"].([]any)
			for _, r := range reqs {
				q := r.(map[string]any)
				if _, ok := q["prefill_seconds"].(json.Number); !ok {
					continue
				}
				ttft, err := strconv.ParseFloat(string(q["ttft_seconds"].(json.Number)), 64)
				if err != nil {
					t.Fatal(err)
				}
				q["prefill_seconds"] = json.Number(strconv.FormatFloat(2*ttft, 'g', -1, 64))
				writeRaw(t, dir, paths[i], d)
				forge(t, dir)
				return
			}
		}
	}
	t.Skip("no raw request with a timed prefill")
}
