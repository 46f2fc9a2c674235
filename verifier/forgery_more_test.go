package verifier

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/horizon-runmap/horizon/editions"
)

// More consistent forgeries, one per invariant not yet forged elsewhere:
// a claim's unit, a worker's host, and a configuration's capacity.
func init() {
	forgeries = append(forgeries,
		forgery{family: "binding", name: "claim unit changed with its value", want: IDBindingClaimTerms,
			apply: func(t *testing.T, dir string) {
				// "tokens/s" claims re-stated per millisecond would read as a
				// 1000x smaller number; the forger rewrites the unit so the
				// claim stays "true" of its source and shows the number he
				// likes in a table that prints units.
				edit(t, dir, editions.ClaimsFile, func(d map[string]any) {
					_, c := claimWithSuffix(t, d, ".pooled_decode_tok_s")
					c["unit"] = "tokens/ms"
				})
				forge(t, dir)
			}},
		forgery{family: "physics", name: "one worker's host renamed", want: IDPhysHost,
			apply: func(t *testing.T, dir string) {
				ids := configIDs(t, dir)
				paths := rawPathsOf(t, dir, ids[len(ids)-1])
				edit(t, dir, paths[len(paths)-1], func(d map[string]any) {
					obj(t, d, "environment")["hostname"] = "a-faster-machine"
				})
				forge(t, dir)
			}},
		forgery{family: "physics", name: "a configuration's capacity raised in the campaign and its records", want: IDPhysPlacement,
			apply: func(t *testing.T, dir string) {
				// The forger claims a partial-residency run used more rows
				// than it placed: capacity edited in the campaign (re-frozen)
				// and in every record and aggregate, the placement left as
				// measured.
				var target string
				var capacity int64
				for _, id := range configIDs(t, dir) {
					d := readTree(t, dir, rawPathsOf(t, dir, id)[0])
					s := obj(t, d, "setup")
					c, e := numInt(t, s["capacity"]), numInt(t, obj(t, s, "model")["experts_per_layer"])
					if c+1 < e {
						target, capacity = id, c
						break
					}
				}
				if target == "" {
					t.Skip("no partial-residency configuration with room above its capacity")
				}
				bumped := json.Number(strconv.FormatInt(capacity+1, 10))
				for _, p := range rawPathsOf(t, dir, target) {
					edit(t, dir, p, func(d map[string]any) { obj(t, d, "setup")["capacity"] = bumped })
				}
				edit(t, dir, editions.ConfigPath(target), func(d map[string]any) { d["capacity"] = bumped })
				edit(t, dir, editions.CampaignFile, func(d map[string]any) {
					for _, c := range arr(t, d, "campaign", "configurations") {
						if c := c.(map[string]any); c["id"] == target {
							c["capacity"] = bumped
						}
					}
				})
				forge(t, dir)
			}},
	)
}
