package verifier

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/horizon-runmap/horizon/editions"
)

// Forgeries of a context-depth edition (a contract that decodes after
// declared prompt lengths: PERF-DEPTH-v1, PERF-DEPTH-SMOKE-v1). Each skips
// on an edition whose contract does not (the fixture, the PERF-REAL-v1
// and PERF-PREFILL editions); TestForgeriesOnCommittedEditions runs them on
// editions/depth-smoke-cpu, and TestDepthForgeries on the edition
// HORIZON_DEPTH_EDITION names (an uncommitted one: out/depth-smoke-cpu).
func init() {
	forgeries = append(forgeries,
		forgery{family: "depth", name: "a depth's raw token timestamps compressed, the per-depth aggregate left as it was", want: IDRecomputeDecodeDepth, apply: forgeRawDepthKeepDepths},
		forgery{family: "depth", name: "a depth's pooled decode rate raised, its claim and reports re-derived", want: IDRecomputeDecodeDepth, apply: forgeDepthPooled},
		forgery{family: "depth", name: "the deepest depth's prompt cut short in every block, every aggregate re-derived", want: IDContractPromptLength, apply: forgeDepthShort},
		forgery{family: "depth", name: "a declared depth changed in the contract, refrozen", want: IDBindingContractUnpinned, apply: forgeDeclaredDepth},
		forgery{family: "depth", name: "a depth's pooled decode claim pointed at another depth", want: IDBindingClaimSource, apply: forgeDepthClaimSource},
		forgery{family: "depth", name: "every record's model context lowered below the deepest depth, that depth's requests dropped, everything re-derived", want: IDPhysContextPreset, apply: forgeContextLowered},
	)
}

// needDepths skips an edition whose contract does not decode per declared
// depth.
func needDepths(t *testing.T, dir string) {
	t.Helper()
	if k := frozenContract(t, dir); k == nil || !k.DecodeByPrompt() {
		t.Skip("the edition's contract does not decode per declared depth")
	}
}

// forgeRawDepthKeepDepths moves every timestamp after the first token of
// one request 10% closer to it (a faster decode at that depth; ttft,
// decode and runtime seconds re-derived from token_ns as the worker does)
// and re-derives everything, then puts back the per-depth aggregate the
// honest records gave: the forger keeps the depth table people read and
// raw records that back a faster one.
func forgeRawDepthKeepDepths(t *testing.T, dir string) {
	needDepths(t, dir)
	id := configIDs(t, dir)[0]
	cp := editions.ConfigPath(id)
	honest := obj(t, readTree(t, dir, cp), "metrics")["decode_depths"]
	paths, docs := rawTrees(t, dir, id)
	q := obj(t, docs[0], "requests", 0)
	ns := q["token_ns"].([]any)
	first := numInt(t, ns[0])
	for j := 1; j < len(ns); j++ {
		ns[j] = json.Number(strconv.FormatInt(first+(numInt(t, ns[j])-first)*9/10, 10))
	}
	last := numInt(t, ns[len(ns)-1])
	q["decode_seconds"] = json.Number(strconv.FormatFloat(float64(last-first)/1e9, 'g', -1, 64))
	q["runtime_seconds"] = json.Number(strconv.FormatFloat(float64(last)/1e9, 'g', -1, 64))
	writeRaw(t, dir, paths[0], docs[0])
	forge(t, dir)
	edit(t, dir, cp, func(doc map[string]any) { obj(t, doc, "metrics")["decode_depths"] = honest })
	forge2(t, dir)
}

// forgeDepthPooled raises the deepest depth's pooled rate by 10% in the
// configuration document (its decode seconds lowered to match); claims and
// reports follow it.
func forgeDepthPooled(t *testing.T, dir string) {
	needDepths(t, dir)
	id := configIDs(t, dir)[0]
	edit(t, dir, editions.ConfigPath(id), func(doc map[string]any) {
		dds := arr(t, doc, "metrics", "decode_depths")
		dd := dds[len(dds)-1].(map[string]any)
		v, err := strconv.ParseFloat(string(dd["pooled_tok_s"].(json.Number)), 64)
		if err != nil {
			t.Fatal(err)
		}
		// The ratio the claim cites follows: the same tokens in less time.
		// The time is chosen first and the rate derived from it by the same
		// division the claim's ratio check makes, so the forgery is exactly
		// consistent whatever the measured rate (tokens / (tokens / r) is not
		// always r in floating point).
		tokens := float64(numInt(t, dd["decode_tokens"]))
		secs := tokens / (v * 1.1)
		dd["decode_seconds"] = json.Number(strconv.FormatFloat(secs, 'g', -1, 64))
		dd["pooled_tok_s"] = json.Number(strconv.FormatFloat(tokens/secs, 'g', -1, 64))
	})
	forge2(t, dir)
}

// forgeDepthShort drops the last token of the deepest depth's prompt (the
// block's last request) in every worker of the first configuration
// (prompt_tokens and prompt_token_ids agree), then re-derives everything:
// a shallower context decodes faster.
func forgeDepthShort(t *testing.T, dir string) {
	needDepths(t, dir)
	id := configIDs(t, dir)[0]
	paths, docs := rawTrees(t, dir, id)
	for i, d := range docs {
		reqs := arr(t, d, "requests")
		q := reqs[len(reqs)-1].(map[string]any)
		ids := q["prompt_token_ids"].([]any)
		q["prompt_token_ids"] = ids[:len(ids)-1]
		q["prompt_tokens"] = json.Number(strconv.Itoa(len(ids) - 1))
		writeRaw(t, dir, paths[i], d)
	}
	forge(t, dir)
}

// forgeDeclaredDepth halves the deepest depth in the frozen contract and
// refreezes it (with the raw records' prompts cut to match, every
// aggregate re-derived): the contract is no longer the released one.
func forgeDeclaredDepth(t *testing.T, dir string) {
	needDepths(t, dir)
	var depth int
	edit(t, dir, editions.ContractFile, func(doc map[string]any) {
		ps := arr(t, doc, "contract", "prompts")
		p := ps[len(ps)-1].(map[string]any)
		depth = int(numInt(t, p["tokens"]) / 2)
		p["tokens"] = json.Number(strconv.Itoa(depth))
	})
	for _, id := range configIDs(t, dir) {
		paths, docs := rawTrees(t, dir, id)
		for i, d := range docs {
			reqs := arr(t, d, "requests")
			q := reqs[len(reqs)-1].(map[string]any)
			q["prompt_token_ids"] = q["prompt_token_ids"].([]any)[:depth]
			q["prompt_tokens"] = json.Number(strconv.Itoa(depth))
			writeRaw(t, dir, paths[i], d)
		}
	}
	forge(t, dir)
}

// forgeDepthClaimSource points the first depth's pooled decode claim (its
// source, numerator, denominator and interval) at the second depth's
// entry, with the values re-derived from it.
func forgeDepthClaimSource(t *testing.T, dir string) {
	needDepths(t, dir)
	const from, to = "/metrics/decode_depths/0/", "/metrics/decode_depths/1/"
	edit(t, dir, editions.ClaimsFile, func(doc map[string]any) {
		for _, c := range doc["claims"].([]any) {
			c := c.(map[string]any)
			src := obj(t, c, "source")
			if p, _ := src["pointer"].(string); p != from+"pooled_tok_s" {
				continue
			}
			src["pointer"] = to + "pooled_tok_s"
			obj(t, c, "numerator")["pointer"] = to + "decode_tokens"
			obj(t, c, "denominator")["pointer"] = to + "decode_seconds"
			obj(t, c, "interval", "lo")["pointer"] = to + "interval/lo"
			obj(t, c, "interval", "hi")["pointer"] = to + "interval/hi"
			return
		}
		t.Fatal("no depth claim")
	})
	forge2(t, dir)
}

// TestDepthForgeries runs every consistent forgery (those of other
// families skip or apply as on any edition) on the edition
// HORIZON_DEPTH_EDITION names: the smoke edition before it is committed
// (make depth-smoke-check sets it to its fresh run). Once
// editions/depth-smoke-cpu is committed TestForgeriesOnCommittedEditions
// runs them there too.
func TestDepthForgeries(t *testing.T) {
	src := os.Getenv("HORIZON_DEPTH_EDITION")
	if src == "" {
		t.Skip("HORIZON_DEPTH_EDITION is not set")
	}
	schemas := fixtureSchemas(t)
	if rep, err := Verify(src, Options{Schemas: schemas}); err != nil || !rep.Passed() {
		t.Fatalf("%s does not verify clean before any forgery: %v\n%s", src, err, findingsText(rep.Findings))
	}
	for _, f := range forgeries {
		t.Run(f.family+"/"+f.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), filepath.Base(src))
			if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
				t.Fatal(err)
			}
			runForgery(t, dir, f, Options{Schemas: schemas})
		})
	}
}

// forgeContextLowered lowers setup.model.max_positions in every record of
// the edition to one position short of the deepest depth's request, as if
// the model's context could not hold it, and drops that depth's requests
// (the contract would then let it be where-held): a forger who hides a
// slow deep depth. The synthetic preset pins the context.
func forgeContextLowered(t *testing.T, dir string) {
	needDepths(t, dir)
	for _, id := range configIDs(t, dir) {
		paths, docs := rawTrees(t, dir, id)
		for i, d := range docs {
			m := obj(t, d, "setup", "model")
			if _, ok := m["max_positions"]; !ok {
				t.Skip("records without setup.model.max_positions")
			}
			reqs := arr(t, d, "requests")
			q := reqs[len(reqs)-1].(map[string]any)
			need := numInt(t, q["prompt_tokens"]) + numInt(t, q["n"]) - 1
			m["max_positions"] = json.Number(strconv.FormatInt(need-1, 10))
			d["requests"] = reqs[:len(reqs)-1]
			writeRaw(t, dir, paths[i], d)
		}
	}
	forge(t, dir)
}
