package verifier

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/horizon-runmap/horizon/editions"
)

// Forgeries of a prefill-by-length edition (a contract with declared prompt
// lengths: PERF-PREFILL-v1, PERF-PREFILL-SMOKE-v1). Each skips on an edition
// whose contract declares none (the fixture, the PERF-REAL-v1 editions);
// TestForgeriesOnCommittedEditions runs them on editions/prefill-smoke-cpu.
func init() {
	forgeries = append(forgeries,
		forgery{family: "prefill", name: "a raw prefill_seconds halved, the per-length aggregate left as it was", want: IDRecomputePrefillLength, apply: forgeRawPrefillKeepLengths},
		forgery{family: "prefill", name: "a prompt length's mean prefill rate raised, its claim and reports re-derived", want: IDRecomputePrefillLength, apply: forgeLengthMean},
		forgery{family: "prefill", name: "a prompt cut short in every block, every aggregate re-derived", want: IDContractPromptLength, apply: forgePromptShort},
		forgery{family: "prefill", name: "a declared prompt length changed in the contract, refrozen", want: IDBindingContractUnpinned, apply: forgeDeclaredLength},
		forgery{family: "prefill", name: "a prompt length's mean claim pointed at another length", want: IDBindingClaimSource, apply: forgeLengthClaimSource},
	)
}

// needLengths skips an edition whose contract declares no prompt lengths.
func needLengths(t *testing.T, dir string) {
	t.Helper()
	if k := frozenContract(t, dir); k == nil || k.PromptRule == nil {
		t.Skip("the edition's contract declares no prompt lengths")
	}
}

// forgeRawPrefillKeepLengths halves one request's prefill_seconds (a
// faster prefill, still within (0, TTFT]) and re-derives everything, then
// puts back the per-length aggregate the honest records gave: the forger
// keeps the table people read and the raw records that back a faster one.
func forgeRawPrefillKeepLengths(t *testing.T, dir string) {
	needLengths(t, dir)
	id := configIDs(t, dir)[0]
	cp := editions.ConfigPath(id)
	honest := obj(t, readTree(t, dir, cp), "metrics")["prefill_lengths"]
	paths, docs := rawTrees(t, dir, id)
	q := obj(t, docs[0], "requests", 0)
	s, err := strconv.ParseFloat(string(q["prefill_seconds"].(json.Number)), 64)
	if err != nil {
		t.Fatal(err)
	}
	q["prefill_seconds"] = json.Number(strconv.FormatFloat(s/2, 'g', -1, 64))
	writeRaw(t, dir, paths[0], docs[0])
	forge(t, dir)
	edit(t, dir, cp, func(doc map[string]any) { obj(t, doc, "metrics")["prefill_lengths"] = honest })
	forge2(t, dir)
}

// forgeLengthMean raises the first length's mean by 10% in the
// configuration document; claims and reports follow it.
func forgeLengthMean(t *testing.T, dir string) {
	needLengths(t, dir)
	id := configIDs(t, dir)[0]
	edit(t, dir, editions.ConfigPath(id), func(doc map[string]any) {
		pl := obj(t, doc, "metrics", "prefill_lengths", 0)
		v, err := strconv.ParseFloat(string(pl["mean_tok_s"].(json.Number)), 64)
		if err != nil {
			t.Fatal(err)
		}
		pl["mean_tok_s"] = json.Number(strconv.FormatFloat(v*1.1, 'g', -1, 64))
	})
	forge2(t, dir)
}

// forgePromptShort drops the last token of the first prompt in every
// worker of the first configuration (prompt_tokens and prompt_token_ids
// agree), then re-derives everything: a shorter prompt prefills faster.
func forgePromptShort(t *testing.T, dir string) {
	needLengths(t, dir)
	id := configIDs(t, dir)[0]
	paths, docs := rawTrees(t, dir, id)
	for i, d := range docs {
		q := obj(t, d, "requests", 0)
		ids := q["prompt_token_ids"].([]any)
		q["prompt_token_ids"] = ids[:len(ids)-1]
		q["prompt_tokens"] = json.Number(strconv.Itoa(len(ids) - 1))
		writeRaw(t, dir, paths[i], d)
	}
	forge(t, dir)
}

// forgeDeclaredLength lowers the last (longest) prompt's declared length
// in the frozen contract by one and refreezes it: the contract is no
// longer the released one. (The first may be 1 token long: PERF-DEPTH-v1's
// depth 0.)
func forgeDeclaredLength(t *testing.T, dir string) {
	needLengths(t, dir)
	edit(t, dir, editions.ContractFile, func(doc map[string]any) {
		ps := arr(t, doc, "contract", "prompts")
		p := ps[len(ps)-1].(map[string]any)
		p["tokens"] = json.Number(strconv.FormatInt(numInt(t, p["tokens"])-1, 10))
	})
	forge(t, dir)
}

// forgeLengthClaimSource points the first length's mean claim at the
// second length's mean (a better number, one row down), with the value
// re-derived from it.
func forgeLengthClaimSource(t *testing.T, dir string) {
	needLengths(t, dir)
	edit(t, dir, editions.ClaimsFile, func(doc map[string]any) {
		for _, c := range doc["claims"].([]any) {
			c := c.(map[string]any)
			src := obj(t, c, "source")
			if p, _ := src["pointer"].(string); p == "/metrics/prefill_lengths/0/mean_tok_s" {
				src["pointer"] = "/metrics/prefill_lengths/1/mean_tok_s"
				return
			}
		}
		t.Fatal("no prompt length claim")
	})
	forge2(t, dir)
}

// forge2 re-derives what follows the configuration documents as they now
// are (claims' values, reports, the manifest) without recomputing the
// documents from raw.
func forge2(t *testing.T, dir string) {
	t.Helper()
	refreshClaims(t, dir)
	rerenderReports(t, dir)
	rehash(t, dir)
}
