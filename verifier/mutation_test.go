package verifier

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/editions"
)

// The mutation suite: each case takes a valid edition, tampers with it in
// one way and asserts that the verifier fails it with the finding ID that
// names the tampering. Where the case says so, the tampering keeps every
// shallower check quiet (aggregates recomputed, manifest re-hashed), so the
// deeper check is the one that must fire. The tampering helpers work on any
// edition (see TestMutationsOnCommittedEditions); a case whose precondition
// the edition does not meet is skipped.

type mutation struct {
	name  string
	want  string
	apply func(t *testing.T, dir string)
}

var mutations = []mutation{
	{"byte flipped in a raw record", IDManifestHash, func(t *testing.T, dir string) {
		p := filepath.Join(dir, filepath.FromSlash(firstRaw(t, dir)))
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		i := len(b) / 2
		for b[i] < '0' || b[i] > '8' {
			i++
		}
		b[i]++ // same size, other content
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}},
	{"VRAM timeline where VRAM was not observed, manifest re-hashed", IDRecomputeVRAMTimeline, func(t *testing.T, dir string) {
		edit(t, dir, firstRaw(t, dir), func(d map[string]any) {
			o := obj(t, d, "observations")
			if _, ok := o["vram_peak_bytes"].(string); !ok {
				t.Skip("this edition observed VRAM")
			}
			o["vram_timeline"] = []any{map[string]any{"at_ns": 0, "device_used_bytes": 1 << 30, "process_used_bytes": "UNKNOWN"}}
		})
		rehash(t, dir)
	}},
	{"file deleted", IDManifestMissingFile, func(t *testing.T, dir string) {
		remove(t, dir, editions.ReportMD)
	}},
	{"unlisted file added", IDManifestUnlisted, func(t *testing.T, dir string) {
		writeFile(t, dir, "notes.txt", "not part of the edition\n")
	}},
	{"symlink in the edition", IDManifestNotRegular, func(t *testing.T, dir string) {
		if err := os.Symlink("/etc/hostname", filepath.Join(dir, "link")); err != nil {
			t.Skip(err)
		}
	}},
	{"aggregate edited, manifest re-hashed", IDRecomputePooledDecode, func(t *testing.T, dir string) {
		edit(t, dir, firstConfigPath(t, dir), func(d map[string]any) {
			m := obj(t, d, "metrics")
			m["pooled_decode_tok_s"] = numFloat(t, m["pooled_decode_tok_s"]) * 1.01
		})
		rehash(t, dir)
	}},
	{"claim value edited, manifest re-hashed", IDClaimsValue, func(t *testing.T, dir string) {
		edit(t, dir, editions.ClaimsFile, func(d map[string]any) {
			c := obj(t, d, "claims", 0)
			c["value"] = numFloat(t, c["value"]) + 1
		})
		rehash(t, dir)
	}},
	{"claim source value edited", IDClaimsSourceValue, func(t *testing.T, dir string) {
		edit(t, dir, editions.ClaimsFile, func(d map[string]any) {
			s := obj(t, d, "claims", 0, "source")
			s["value"] = numFloat(t, s["value"]) + 1
		})
		rehash(t, dir)
	}},
	{"claim numerator points elsewhere, values refreshed", IDClaimsRatio, func(t *testing.T, dir string) {
		edit(t, dir, editions.ClaimsFile, func(d map[string]any) {
			for _, c := range arr(t, d, "claims") {
				if n, ok := c.(map[string]any)["numerator"].(map[string]any); ok {
					// /blocks: not /requests, which is the output token
					// count itself when every request has one token.
					n["pointer"] = "/blocks"
					return
				}
			}
			t.Skip("no claim with a numerator")
		})
		reaggregate(t, dir)
		rehash(t, dir)
	}},
	{"claim status invalid", IDClaimsStatus, func(t *testing.T, dir string) {
		edit(t, dir, editions.ClaimsFile, func(d map[string]any) { obj(t, d, "claims", 0)["reproduction"] = "probably" })
		rehash(t, dir)
	}},
	{"request with N-1 tokens, aggregates recomputed", IDContractTokenCount, func(t *testing.T, dir string) {
		edit(t, dir, firstRaw(t, dir), func(d map[string]any) {
			q := obj(t, d, "requests", 0)
			ids, ns := arr(t, q, "token_ids"), arr(t, q, "token_ns")
			if len(ids) < 2 {
				// One output token (a prefill edition): N+1 instead, the
				// extra token one nanosecond after the first.
				q["token_ids"], q["token_ns"] = append(ids, ids[0]), append(ns, json.Number(strconv.FormatInt(numInt(t, ns[0])+1, 10)))
				q["n"] = len(ids) + 1
				setTimings(t, q)
				return
			}
			q["token_ids"], q["token_ns"] = ids[:len(ids)-1], ns[:len(ns)-1]
			q["n"] = len(ids) - 1
			setTimings(t, q)
		})
		reaggregate(t, dir)
		rehash(t, dir)
	}},
	{"EOS id inside a stream", IDContractEOS, func(t *testing.T, dir string) {
		edit(t, dir, firstRaw(t, dir), func(d map[string]any) {
			eos := arr(t, d, "setup", "model", "eos_token_ids")
			if len(eos) == 0 {
				t.Skip("no EOS ids recorded")
			}
			ids := arr(t, d, "requests", 0, "token_ids")
			ids[min(2, len(ids)-1)] = eos[0]
		})
		rehash(t, dir)
	}},
	{"two prompts swapped in order, aggregates recomputed", IDContractPromptOrder, func(t *testing.T, dir string) {
		edit(t, dir, firstRaw(t, dir), func(d map[string]any) {
			reqs := arr(t, d, "requests")
			reqs[0], reqs[1] = reqs[1], reqs[0]
			reindex(t, reqs)
		})
		reaggregate(t, dir)
		rehash(t, dir)
	}},
	{"warmup counted as measured, aggregates recomputed", IDContractWarmupMeasured, func(t *testing.T, dir string) {
		edit(t, dir, firstRaw(t, dir), func(d map[string]any) {
			w := obj(t, d, "warmup")
			w["excluded"] = false
			reqs := arr(t, d, "requests")
			q := deepCopy(t, reqs[0]).(map[string]any)
			n := int(numInt(t, w["n"]))
			q["prompt_id"], q["n"], q["token_ids"] = w["prompt_id"], n, w["token_ids"]
			q["token_ns"] = arr(t, q, "token_ns")[:n]
			setTimings(t, q)
			reqs = append([]any{q}, reqs...)
			reindex(t, reqs)
			d["requests"] = reqs
		})
		reaggregate(t, dir)
		rehash(t, dir)
	}},
	{"block missing, aggregates recomputed", IDContractBlockMissing, func(t *testing.T, dir string) {
		paths := rawPathsOf(t, dir, configIDs(t, dir)[0])
		remove(t, dir, paths[len(paths)-1])
		reaggregate(t, dir)
		rehash(t, dir)
	}},
	{"extra block beyond the contract, aggregates recomputed", IDContractBlockExtra, func(t *testing.T, dir string) {
		id := configIDs(t, dir)[0]
		paths := rawPathsOf(t, dir, id)
		d := readTree(t, dir, paths[0])
		d["block"] = len(paths) + 1
		writeJSON(t, dir, editions.RawPath(id, len(paths)+1), d)
		reaggregate(t, dir)
		rehash(t, dir)
	}},
	{"configuration document removed", IDContractConfigMissing, func(t *testing.T, dir string) {
		remove(t, dir, firstConfigPath(t, dir))
		rehash(t, dir)
	}},
	{"raw record of another contract", IDContractRef, func(t *testing.T, dir string) {
		edit(t, dir, firstRaw(t, dir), func(d map[string]any) { obj(t, d, "contract")["sha256"] = sha("0") })
		rehash(t, dir)
	}},
	{"contract edited after freezing", IDContractHash, func(t *testing.T, dir string) {
		edit(t, dir, editions.ContractFile, func(d map[string]any) {
			c := obj(t, d, "contract")
			c["description"] = "a laxer contract"
		})
		rehash(t, dir)
	}},
	{"campaign edited after freezing", IDContractCampaignHash, func(t *testing.T, dir string) {
		edit(t, dir, editions.CampaignFile, func(d map[string]any) { obj(t, d, "campaign")["description"] = "another campaign" })
		rehash(t, dir)
	}},
	{"timestamps out of order", IDContractTimestamps, func(t *testing.T, dir string) {
		edit(t, dir, firstRaw(t, dir), func(d map[string]any) {
			ns := arr(t, d, "requests", 0, "token_ns")
			if len(ns) < 3 {
				t.Skip("fewer than three timestamps per request (one output token): no order to break")
			}
			a, b := numInt(t, ns[1]), numInt(t, ns[2])
			if a == b {
				b++
			}
			ns[1], ns[2] = b, a
		})
		rehash(t, dir)
	}},
	{"ttft not token_ns[0], aggregates recomputed", IDContractTTFT, func(t *testing.T, dir string) {
		edit(t, dir, firstRaw(t, dir), func(d map[string]any) {
			q := obj(t, d, "requests", 0)
			q["ttft_seconds"] = numFloat(t, q["ttft_seconds"]) * 0.5
		})
		reaggregate(t, dir)
		rehash(t, dir)
	}},
	{"prefill rate edited in a configuration document (or added where raw has none)", IDRecomputePrefill, func(t *testing.T, dir string) {
		edit(t, dir, editions.ConfigPath(configIDs(t, dir)[0]), func(d map[string]any) {
			m := obj(t, d, "metrics")
			if p, ok := m["prefill"].(map[string]any); ok {
				if _, timed := p["tok_s"].(json.Number); timed {
					p["tok_s"] = numFloat(t, p["tok_s"]) * 2
					return
				}
			}
			m["prefill"] = map[string]any{"prompt_tokens": 1, "seconds": 1, "tok_s": 1}
		})
		rehash(t, dir)
	}},
	{"request index wrong", IDContractRequestIndex, func(t *testing.T, dir string) {
		edit(t, dir, firstRaw(t, dir), func(d map[string]any) { obj(t, d, "requests", 0)["index"] = 7 })
		rehash(t, dir)
	}},
	{"prompt_tokens disagrees with prompt_token_ids", IDContractPromptTokens, func(t *testing.T, dir string) {
		edit(t, dir, firstRaw(t, dir), func(d map[string]any) {
			q := obj(t, d, "requests", 0)
			q["prompt_tokens"] = numInt(t, q["prompt_tokens"]) + 1
		})
		rehash(t, dir)
	}},
	{"regime does not match capacity", IDContractSetup, func(t *testing.T, dir string) {
		edit(t, dir, firstRaw(t, dir), func(d map[string]any) {
			s := obj(t, d, "setup")
			if s["regime"] == "full" {
				s["regime"] = "partial"
			} else {
				s["regime"] = "full"
			}
		})
		rehash(t, dir)
	}},
	{"required observation made UNKNOWN, aggregates recomputed", IDContractObservation, func(t *testing.T, dir string) {
		edit(t, dir, firstRaw(t, dir), func(d map[string]any) { obj(t, d, "observations")["rss_peak_bytes"] = editions.Unknown })
		reaggregate(t, dir)
		rehash(t, dir)
	}},
	{"raw record of another edition", IDManifestEditionID, func(t *testing.T, dir string) {
		edit(t, dir, firstRaw(t, dir), func(d map[string]any) { d["edition"] = "someone-else" })
		rehash(t, dir)
	}},
	{"D2H bytes non-zero, aggregates recomputed", IDInvD2H, func(t *testing.T, dir string) {
		edit(t, dir, firstRaw(t, dir), func(d map[string]any) { obj(t, d, "requests", 0, "cache")["d2h_expert_bytes"] = 4096 })
		reaggregate(t, dir)
		rehash(t, dir)
	}},
	{"UNKNOWN replaced by 0 in a configuration", IDInvZeroForUnknown, func(t *testing.T, dir string) {
		p, sect, key := unobservedConfigField(t, dir)
		edit(t, dir, p, func(d map[string]any) { obj(t, d, sect)[key] = 0 })
		rehash(t, dir)
	}},
	{"claim of 0 for an UNKNOWN observation", IDInvZeroForUnknown, func(t *testing.T, dir string) {
		p, sect, key := unobservedConfigField(t, dir)
		edit(t, dir, editions.ClaimsFile, func(d map[string]any) {
			c := deepCopy(t, obj(t, d, "claims", 0)).(map[string]any)
			c["id"] = "made-up-zero"
			c["value"], c["decimals"], c["numerator"], c["denominator"] = 0, 0, nil, nil
			c["source"] = map[string]any{"file": p, "pointer": "/" + sect + "/" + key, "value": 0}
			d["claims"] = append(arr(t, d, "claims"), c)
		})
		rehash(t, dir)
	}},
	{"RSS peak edited in a configuration", IDRecomputeRSS, func(t *testing.T, dir string) {
		edit(t, dir, firstConfigPath(t, dir), func(d map[string]any) {
			m := obj(t, d, "metrics")
			if _, ok := m["rss_peak_bytes"].(json.Number); !ok {
				t.Skip("RSS not observed")
			}
			m["rss_peak_bytes"] = numInt(t, m["rss_peak_bytes"]) + 4096
		})
		rehash(t, dir)
	}},
	{"block spread edited", IDRecomputeSpread, func(t *testing.T, dir string) {
		edit(t, dir, firstConfigPath(t, dir), func(d map[string]any) {
			s := obj(t, d, "metrics", "block_spread_decode_tok_s")
			s["max"] = numFloat(t, s["max"]) + 0.001
		})
		rehash(t, dir)
	}},
	{"H2D bytes of a request edited", IDRecomputeH2D, func(t *testing.T, dir string) {
		edit(t, dir, firstRaw(t, dir), func(d map[string]any) {
			c := obj(t, d, "requests", 0, "cache")
			c["h2d_bytes"] = numInt(t, c["h2d_bytes"]) + 4096
		})
		rehash(t, dir)
	}},
	{"layer misses do not add up, aggregates recomputed", IDRecomputeLayerMisses, func(t *testing.T, dir string) {
		edit(t, dir, firstRaw(t, dir), func(d map[string]any) {
			lm := arr(t, d, "requests", 0, "cache", "layer_misses")
			lm[0] = numInt(t, lm[0]) + 1
		})
		reaggregate(t, dir)
		rehash(t, dir)
	}},
	{"schema violation", IDSchemaInvalid, func(t *testing.T, dir string) {
		edit(t, dir, editions.ClaimsFile, func(d map[string]any) { delete(obj(t, d, "claims", 0), "statement") })
		rehash(t, dir)
	}},
	{"token stream differs across capacities", IDConsTokenStream, func(t *testing.T, dir string) {
		_, b := capacityPair(t, dir)
		for _, p := range rawPathsOf(t, dir, b) {
			edit(t, dir, p, func(d map[string]any) {
				ids := arr(t, d, "requests", 0, "token_ids")
				bumpToken(t, d, ids, min(3, len(ids)-1))
			})
		}
		rehash(t, dir)
	}},
	{"prompt tokenised differently across capacities", IDConsPromptLen, func(t *testing.T, dir string) {
		_, b := capacityPair(t, dir)
		for _, p := range rawPathsOf(t, dir, b) {
			edit(t, dir, p, func(d map[string]any) { bumpToken(t, d, arr(t, d, "requests", 0, "prompt_token_ids"), 0) })
		}
		rehash(t, dir)
	}},
}

func TestMutations(t *testing.T) {
	if len(mutations) < 15 {
		t.Fatalf("only %d mutations", len(mutations))
	}
	schemas := fixtureSchemas(t)
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			dir := newFixture(t)
			runMutation(t, dir, m, schemas)
		})
	}
}

// runMutation applies m to the edition in dir and checks the verdict.
func runMutation(t *testing.T, dir string, m mutation, schemas SchemaSet) {
	t.Helper()
	m.apply(t, dir)
	rep, err := Verify(dir, Options{Schemas: schemas})
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if rep.Passed() {
		t.Fatalf("tampering %q passed verification:\n%s", m.name, findingsText(rep.Findings))
	}
	if !rep.Has(m.want) {
		t.Fatalf("tampering %q: want finding %s, got:\n%s", m.name, m.want, findingsText(rep.Findings))
	}
	// Every case that is not about the manifest re-hashes it, so the
	// manifest check must stay quiet; a case that recomputes aggregates
	// must leave the recompute check quiet too: the deeper check fired.
	quiet := map[string]bool{}
	if catalogue[m.want].Check != "manifest" {
		quiet["manifest"] = true
	}
	if strings.Contains(m.name, "aggregates recomputed") && catalogue[m.want].Check != "recompute" {
		quiet["recompute"] = true
	}
	for _, f := range rep.Findings {
		if f.ID == IDInternalPanic {
			t.Fatalf("a check crashed: %s", f.Message)
		}
		if quiet[f.Check] && f.Severity == Error {
			t.Errorf("tampering %q should leave check %s quiet, got %s %s: %s", m.name, f.Check, f.ID, f.Where(), f.Message)
		}
	}
}

// ---------------------------------------------------------------------------
// Tampering helpers.

func remove(t *testing.T, dir, rel string) {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, filepath.FromSlash(rel))); err != nil {
		t.Fatal(err)
	}
}

func firstConfigPath(t *testing.T, dir string) string {
	return editions.ConfigPath(configIDs(t, dir)[0])
}

func firstRaw(t *testing.T, dir string) string {
	t.Helper()
	paths := rawPathsOf(t, dir, configIDs(t, dir)[0])
	if len(paths) == 0 {
		t.Fatal("no raw records")
	}
	return paths[0]
}

func numFloat(t *testing.T, v any) float64 {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Skipf("%v is not a number", v)
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func deepCopy(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	out, err := parseTree(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sha(s string) string {
	out := make([]byte, 64)
	for i := range out {
		out[i] = s[0]
	}
	return string(out)
}

// setTimings rederives a request's timings from its token_ns, as a writer
// would.
func setTimings(t *testing.T, q map[string]any) {
	t.Helper()
	ns := arr(t, q, "token_ns")
	first, last := numInt(t, ns[0]), numInt(t, ns[len(ns)-1])
	q["ttft_seconds"] = float64(first) / 1e9
	q["decode_seconds"] = float64(last-first) / 1e9
	q["runtime_seconds"] = float64(last) / 1e9
}

func reindex(t *testing.T, reqs []any) {
	for i, q := range reqs {
		q.(map[string]any)["index"] = i
	}
}

// bumpToken changes token j of ids to another valid non-EOS id.
func bumpToken(t *testing.T, d map[string]any, ids []any, j int) {
	t.Helper()
	vocab := numInt(t, at(t, d, "setup", "model", "vocab"))
	var eos []int64
	for _, e := range arr(t, d, "setup", "model", "eos_token_ids") {
		eos = append(eos, numInt(t, e))
	}
	x := numInt(t, ids[j])
	for {
		x = (x + 1) % vocab
		if !slices.Contains(eos, x) {
			break
		}
	}
	ids[j] = x
}

// capacityPair returns two configurations that must agree token for token
// (same checkpoint, expert format, device, executor) but differ in
// capacity; the case is skipped when the edition has none.
func capacityPair(t *testing.T, dir string) (string, string) {
	t.Helper()
	type key struct{ ckpt, format, device, exec string }
	seen := map[key][]string{}
	caps := map[string]int64{}
	for _, id := range configIDs(t, dir) {
		paths := rawPathsOf(t, dir, id)
		if len(paths) == 0 {
			continue
		}
		d := readTree(t, dir, paths[0])
		k := key{at(t, d, "checkpoint", "sha256").(string), at(t, d, "artifact", "expert_format").(string),
			at(t, d, "environment", "device").(string), at(t, d, "setup", "executor").(string)}
		caps[id] = numInt(t, at(t, d, "setup", "capacity"))
		for _, other := range seen[k] {
			if caps[other] != caps[id] {
				return other, id
			}
		}
		seen[k] = append(seen[k], id)
	}
	t.Skip("no two configurations differ only in capacity")
	return "", ""
}

// unobservedConfigField finds a configuration member that is UNKNOWN or
// UNSUPPORTED; the case is skipped when there is none.
func unobservedConfigField(t *testing.T, dir string) (file, section, key string) {
	t.Helper()
	for _, id := range configIDs(t, dir) {
		p := editions.ConfigPath(id)
		d := readTree(t, dir, p)
		for _, sect := range []string{"invariants", "metrics"} {
			m := obj(t, d, sect)
			keys := make([]string, 0, len(m))
			for k := range m {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				if s, ok := m[k].(string); ok && (s == editions.Unknown || s == editions.Unsupported) {
					return p, sect, k
				}
			}
		}
	}
	t.Skip("no UNKNOWN or UNSUPPORTED aggregate")
	return "", "", ""
}
