package verifier

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/horizon-runmap/horizon/editions"
)

// More consistent forgeries, one per invariant not yet forged elsewhere:
// a claim's unit, a worker's host, a configuration's eviction policy and
// its capacity.
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
		forgery{family: "physics", name: "one worker's CPU (cuda: GPU) model changed under hosts: uniform", want: IDPhysHostsUniform,
			apply: func(t *testing.T, dir string) {
				// The forger ran one worker on a faster machine and passes
				// it off as the others' (a cpu edition: its CPU is the
				// device); hostnames alone may differ under uniform.
				ids := configIDs(t, dir)
				paths := rawPathsOf(t, dir, ids[len(ids)-1])
				edit(t, dir, paths[len(paths)-1], func(d map[string]any) {
					e := obj(t, d, "environment")
					e["hostname"], e["cpu"] = "a-faster-machine", "A Faster CPU @ 9.9GHz"
					if e["device"] == "cuda" { // there the GPU is the device
						e["gpu"] = "A Faster GPU"
					}
				})
				forge(t, dir)
			}},
		forgery{family: "physics", name: "hosts: mixed declared, one worker of a configuration on another host", want: IDPhysHostsMixed,
			apply: func(t *testing.T, dir string) {
				// The campaign re-frozen as mixed (configurations on
				// different machines), and one block of a configuration run
				// elsewhere than its other blocks.
				edit(t, dir, editions.CampaignFile, func(d map[string]any) {
					obj(t, d, "campaign")["hosts"] = "mixed"
				})
				ids := configIDs(t, dir)
				paths := rawPathsOf(t, dir, ids[0])
				edit(t, dir, paths[0], func(d map[string]any) {
					obj(t, d, "environment")["hostname"] = "another-node"
				})
				forge(t, dir)
			}},
		forgery{family: "contract", name: "a configuration's eviction policy changed to one the contract does not admit", want: IDContractPolicy,
			apply: func(t *testing.T, dir string) {
				// The forger ran (or claims) another policy than the
				// contract admits, lfu under PERF-REAL-v1's lru: the policy
				// edited in the campaign (re-frozen), the aggregate and
				// every record, so each document agrees with the others.
				pol := unadmittedPolicy(t, dir)
				target := configIDs(t, dir)[0]
				setEverywhere(t, dir, target, "policy", pol)
				forge(t, dir)
			}},
		forgery{family: "contract", name: "a worker's eviction policy changed against the campaign's", want: IDContractCampaignConfig,
			apply: func(t *testing.T, dir string) {
				// One worker's record claims another policy than the
				// campaign froze for its configuration; the campaign is left
				// as it was.
				target := configIDs(t, dir)[0]
				paths := rawPathsOf(t, dir, target)
				edit(t, dir, paths[len(paths)-1], func(d map[string]any) {
					s := obj(t, d, "setup")
					if s["policy"] == "fifo" {
						s["policy"] = "lru"
					} else {
						s["policy"] = "fifo"
					}
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
				setEverywhere(t, dir, target, "capacity", bumped)
				forge(t, dir)
			}},
	)
}

// setEverywhere sets member key of configuration id to v in every raw
// record's setup, in its configs/<id>.json and in the campaign, so that
// every document agrees (forge then re-freezes and re-hashes).
func setEverywhere(t *testing.T, dir, id, key string, v any) {
	t.Helper()
	for _, p := range rawPathsOf(t, dir, id) {
		edit(t, dir, p, func(d map[string]any) { obj(t, d, "setup")[key] = v })
	}
	edit(t, dir, editions.ConfigPath(id), func(d map[string]any) { d[key] = v })
	edit(t, dir, editions.CampaignFile, func(d map[string]any) {
		for _, c := range arr(t, d, "campaign", "configurations") {
			if c := c.(map[string]any); c["id"] == id {
				c[key] = v
			}
		}
	})
}

// unadmittedPolicy returns a policy the cache model knows that the
// edition's contract does not admit (neither its cache.policy nor one of
// its cache.policies), skipping when it admits them all.
func unadmittedPolicy(t *testing.T, dir string) string {
	t.Helper()
	d := readTree(t, dir, editions.ContractFile)
	cache := obj(t, obj(t, d, "contract"), "cache")
	admitted := map[string]bool{cache["policy"].(string): true}
	if ps, ok := cache["policies"].([]any); ok {
		for _, p := range ps {
			admitted[p.(string)] = true
		}
	}
	for _, p := range []string{"lfu", "arc", "fifo", "lru"} {
		if !admitted[p] {
			return p
		}
	}
	t.Skip("the contract admits every policy the cache model knows")
	return ""
}
