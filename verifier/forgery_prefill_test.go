package verifier

import (
	"testing"

	"github.com/horizon-runmap/horizon/editions"
)

// The prefill family of consistent forgeries: a configuration that claims
// the other prefill mode than the one its routing traces show. The cache
// identity check keys on the mode (physics_cache.go), so a forger could try
// to move a deviant worker out of its siblings' group by relabelling it;
// the traces (batched waves or none) give the mode away.
func init() {
	forgeries = append(forgeries,
		forgery{family: "prefill", name: "prefill mode flipped in a configuration's records and campaign entry, refrozen", want: IDReplayTrace, apply: forgePrefillMode},
	)
}

// forgePrefillMode flips setup.prefill (batched <-> token; absent reads as
// token) in every record of the first configuration whose records carry
// routing traces, and declares the new mode in the frozen campaign, so
// records and campaign agree and every aggregate is re-derived.
func forgePrefillMode(t *testing.T, dir string) {
	var id string
	for _, c := range configIDs(t, dir) {
		_, docs := rawTrees(t, dir, c)
		if len(docs) > 0 {
			if _, ok := obj(t, arr(t, docs[0], "requests")[0])["routing_trace"]; ok {
				id = c
				break
			}
		}
	}
	if id == "" {
		t.Skip("no configuration with routing traces")
	}
	paths, docs := rawTrees(t, dir, id)
	mode := "batched"
	if obj(t, docs[0], "setup")["prefill"] == "batched" {
		mode = "token"
	}
	for i, d := range docs {
		obj(t, d, "setup")["prefill"] = mode
		writeRaw(t, dir, paths[i], d)
	}
	edit(t, dir, editions.CampaignFile, func(d map[string]any) {
		for _, c := range arr(t, d, "campaign", "configurations") {
			if c := c.(map[string]any); c["id"] == id {
				c["prefill"] = mode
			}
		}
	})
	forge(t, dir)
}
