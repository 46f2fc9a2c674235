package verifier

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/editions"
)

// Consistent forgeries against the binding invariants (claims are bound,
// contracts are pinned) and the required-zero invariant. Each leaves every
// value resolving and recomputing: only the binding of a claim to its
// configuration, of a status to the campaign, or of the contract to a
// released one gives it away.
func init() {
	forgeries = append(forgeries,
		forgery{family: "binding", name: "claim sourced from claims.json itself", want: IDBindingClaimSource,
			apply: func(t *testing.T, dir string) {
				edit(t, dir, editions.ClaimsFile, func(d map[string]any) {
					i, c := claimWithSuffix(t, d, ".ttft_mean_s")
					c["value"] = 0.0001 // a flattering TTFT
					c["source"] = map[string]any{"file": editions.ClaimsFile, "pointer": ptr("claims", i, "value"), "value": 0.0001}
				})
				forge(t, dir)
			}},
		forgery{family: "binding", name: "claim sourced from another configuration", want: IDBindingClaimSource,
			apply: func(t *testing.T, dir string) {
				ids := configIDs(t, dir)
				if len(ids) < 2 {
					t.Skip("one configuration")
				}
				edit(t, dir, editions.ClaimsFile, func(d map[string]any) {
					_, c := claimWithSuffix(t, d, ".ttft_mean_s")
					obj(t, c, "source")["file"] = editions.ConfigPath(ids[1])
				})
				forge(t, dir)
			}},
		forgery{family: "binding", name: "claim interval citing another configuration's bounds", want: IDBindingClaimInterval,
			apply: func(t *testing.T, dir string) {
				ids := configIDs(t, dir)
				if len(ids) < 2 {
					t.Skip("one configuration")
				}
				found := false
				edit(t, dir, editions.ClaimsFile, func(d map[string]any) {
					_, c := claimWithSuffix(t, d, ".pooled_decode_tok_s")
					if iv, ok := c["interval"].(map[string]any); ok {
						found = true
						for _, k := range []string{"lo", "hi"} {
							obj(t, iv, k)["file"] = editions.ConfigPath(ids[1])
						}
					}
				})
				if !found {
					t.Skip("claims without intervals")
				}
				forge(t, dir) // refreshes the bounds' values from the new sources
			}},
		forgery{family: "binding", name: "claim statement edited", want: IDBindingStatement,
			apply: func(t *testing.T, dir string) {
				forge(t, dir)
				edit(t, dir, editions.ClaimsFile, func(d map[string]any) {
					c := obj(t, d, "claims", 0)
					c["statement"] = strings.Replace(c["statement"].(string), "measured requests", "measured requests on production traffic", 1)
				})
				rehash(t, dir) // the statement is not derived by the forger's tools any more
			}},
		forgery{family: "binding", name: "claim evidence raised", want: IDBindingStatusRaised,
			apply: func(t *testing.T, dir string) {
				edit(t, dir, editions.ClaimsFile, func(d map[string]any) {
					for _, c := range arr(t, d, "claims") {
						c.(map[string]any)["evidence"] = "E4"
					}
				})
				forge(t, dir)
			}},
		forgery{family: "binding", name: "claim marked reproduced", want: IDBindingReproduction,
			apply: func(t *testing.T, dir string) {
				edit(t, dir, editions.ClaimsFile, func(d map[string]any) { obj(t, d, "claims", 0)["reproduction"] = "reproduced" })
				forge(t, dir)
			}},
		forgery{family: "binding", name: "required claim deleted", want: IDBindingClaimMissing,
			apply: func(t *testing.T, dir string) {
				edit(t, dir, editions.ClaimsFile, func(d map[string]any) {
					i, _ := claimWithSuffix(t, d, ".h2d_bytes")
					cs := arr(t, d, "claims")
					d["claims"] = append(cs[:i:i], cs[i+1:]...)
				})
				forge(t, dir) // the reports' claim count follows
			}},
		forgery{family: "binding", name: "contract relaxed: one block fewer", want: IDBindingContractFile, opts: againstOriginalContract,
			apply: func(t *testing.T, dir string) {
				relaxContract(t, dir, func(k map[string]any) { oneBlockFewer(t, dir, k) })
			}},
		forgery{family: "binding", name: "contract relaxed: shorter warmup", want: IDBindingContractFile, opts: againstOriginalContract,
			apply: func(t *testing.T, dir string) {
				relaxContract(t, dir, func(k map[string]any) {
					w := obj(t, k, "warmup")
					n := numInt(t, w["output_tokens"])
					if n < 2 {
						t.Skip("warmup too short to shorten")
					}
					w["output_tokens"] = n / 2
					for _, id := range configIDs(t, dir) {
						for _, p := range rawPathsOf(t, dir, id) {
							edit(t, dir, p, func(d map[string]any) {
								wu := obj(t, d, "warmup")
								wu["n"] = n / 2
								wu["token_ids"] = arr(t, wu, "token_ids")[:n/2]
							})
						}
					}
				})
			}},
		forgery{family: "binding", name: "contract relaxed: d2h no longer required zero", want: IDBindingContractFile, opts: againstOriginalContract,
			apply: func(t *testing.T, dir string) {
				relaxContract(t, dir, func(k map[string]any) {
					for _, o := range arr(t, k, "observations") {
						o := o.(map[string]any)
						if o["name"] == "d2h_expert_bytes" {
							o["cpu"], o["cuda"] = "may_be_unknown", "may_be_unknown"
							return
						}
					}
					t.Skip("no d2h_expert_bytes observation")
				})
			}},
		forgery{family: "binding", name: "contract relaxed, no contract file given", want: IDBindingContractUnpinned,
			apply: func(t *testing.T, dir string) {
				k := readTree(t, dir, editions.ContractFile)
				if releasedContracts[k["id"].(string)] != k["sha256"] {
					t.Skip("the edition's contract is not a released one to begin with (the fixture)")
				}
				relaxContract(t, dir, func(k map[string]any) { oneBlockFewer(t, dir, k) })
			}},
		forgery{family: "invariants", name: "required zero not observed", want: IDInvRequiredZeroUnobserved,
			apply: func(t *testing.T, dir string) {
				for _, p := range rawPathsOf(t, dir, configIDs(t, dir)[0]) {
					edit(t, dir, p, func(d map[string]any) {
						for _, q := range arr(t, d, "requests") {
							obj(t, q, "cache")["request_artifact_reads"] = editions.Unknown
						}
					})
				}
				forge(t, dir) // the configuration's invariant becomes UNKNOWN, the reports follow
			}},
	)
}

// oneBlockFewer relaxes contract k to one block fewer and drops every
// configuration's last raw record.
func oneBlockFewer(t *testing.T, dir string, k map[string]any) {
	blocks := numInt(t, k["blocks"])
	if blocks < 2 {
		t.Skip("one block")
	}
	k["blocks"] = blocks - 1
	for _, id := range configIDs(t, dir) {
		remove(t, dir, editions.RawPath(id, int(blocks)))
	}
}

// againstOriginalContract verifies a relaxed edition against the contract
// it was made under: the fixture's YAML (fixtureOptions already names it)
// or, for a committed edition, the released contracts/perf-real-v1.yaml.
func againstOriginalContract(t *testing.T, dir string, o *Options) {
	if o.ContractFile == "" {
		o.ContractFile = filepath.Join("..", "contracts", "perf-real-v1.yaml")
	}
}

// claimWithSuffix returns the first claim whose id ends in suffix.
func claimWithSuffix(t *testing.T, d map[string]any, suffix string) (int, map[string]any) {
	t.Helper()
	for i, c := range arr(t, d, "claims") {
		c := c.(map[string]any)
		if strings.HasSuffix(c["id"].(string), suffix) {
			return i, c
		}
	}
	t.Skipf("no claim *%s", suffix)
	return 0, nil
}

// relaxContract edits the frozen contract with relax, re-freezes it, and
// carries the new hash everywhere the old one is cited (the campaign, every
// raw record, the reports' contract line) before forge re-derives the rest:
// what a forger who wants weaker terms does.
func relaxContract(t *testing.T, dir string, relax func(k map[string]any)) {
	t.Helper()
	old := readTree(t, dir, editions.ContractFile)["sha256"].(string)
	edit(t, dir, editions.ContractFile, func(d map[string]any) { relax(obj(t, d, "contract")) })
	refreeze(t, dir, editions.ContractFile, "contract")
	sum := readTree(t, dir, editions.ContractFile)["sha256"].(string)
	edit(t, dir, editions.CampaignFile, func(d map[string]any) { obj(t, d, "campaign", "contract")["sha256"] = sum })
	for _, id := range configIDs(t, dir) {
		for _, p := range rawPathsOf(t, dir, id) {
			edit(t, dir, p, func(d map[string]any) { obj(t, d, "contract")["sha256"] = sum })
		}
	}
	for _, rel := range []string{editions.ReportMD, editions.ReportHTML} {
		p := filepath.Join(dir, rel)
		if b, err := os.ReadFile(p); err == nil {
			writeFile(t, dir, rel, strings.ReplaceAll(string(b), old, sum))
		}
	}
	forge(t, dir)
}
