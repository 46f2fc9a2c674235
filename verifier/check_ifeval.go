package verifier

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
	"github.com/horizon-runmap/horizon/ifeval"
)

// IFEval editions (contracts IFEVAL-v1 and IFEVAL-SMOKE-v1) get the manifest
// and signature checks of every edition and, instead of the residency
// checks, check ifeval: everything the edition says is recomputed on the
// CPU from the retained responses.
var (
	IDIFEvalContract = def("ifeval", "ifeval.contract", Error, "contract.json is not a released IFEval contract, or its hash does not recompute")
	IDIFEvalInput    = def("ifeval", "ifeval.input", Error, "the contract's prompt file hash or population (prompts, instructions) differs from the official input this verifier embeds")
	IDIFEvalRules    = def("ifeval", "ifeval.rules", Error, "the edition was scored under another rule set than this verifier's scorer: its verdicts cannot be recomputed")
	IDIFEvalCampaign = def("ifeval", "ifeval.campaign", Error, "campaign.json is unreadable or names another contract")
	IDIFEvalShard    = def("ifeval", "ifeval.shard", Error, "a shard record is missing, unreadable, out of place, or breaks the contract (prompts, keys, endings, EOS ids, max_new_tokens, prompt format)")
	IDIFEvalSetup    = def("ifeval", "ifeval.setup", Error, "a shard was generated with another capacity, executor, KV cache element type, expert or dense activation dtype or build than its configuration's other shards and the campaign")
	IDIFEvalVerdict  = def("ifeval", "ifeval.verdict", Error, "a retained response re-scores to other verdicts than the configuration's document says")
	IDIFEvalScore    = def("ifeval", "ifeval.score", Error, "a configuration document's scores, endings or rate do not recompute from its shards")
	IDIFEvalClaim    = def("ifeval", "ifeval.claim", Error, "claims.json does not recompute from the configuration documents")
	IDIFEvalReport   = def("ifeval", "ifeval.report", Error, "report.md or report.html does not show a configuration's four accuracies as its document gives them (or the synthetic warning), or the plot is not a PNG")
	IDIFEvalUnknown  = def("ifeval", "ifeval.unexpected-file", Error, "a raw or configuration file that no configuration of the campaign explains")
	IDIFEvalText     = def("ifeval", "ifeval.text-unchecked", Hint, "response texts are checked against the scores, not against their token ids: that needs the tokenizer, which the edition does not carry (a synthetic checkpoint's byte-level texts are decoded and checked)")
	IDIFEvalTime     = def("ifeval", "ifeval.time", Error, "a shard's started_at/finished_at do not parse or run backwards, or its responses' seconds add up to more than that wall clock")
	IDIFEvalDecode   = def("ifeval", "ifeval.decode", Error, "a response's text is not what its token ids decode to, or a raw prompt's token ids are not its text's, under a synthetic checkpoint's byte-level tokenizer")
)

// isIFEvalEdition reports whether the edition's contract.json names an
// IFEval contract.
func isIFEvalEdition(e *Edition) bool {
	d := e.docs[editions.ContractFile]
	return d != nil && d.tree != nil && contracts.IsIFEval(d.str("/id"))
}

// ifevalRuns are the checks of an IFEval edition.
var ifevalRuns = []struct {
	name string
	run  func(*view, *findings)
}{
	{"manifest", checkManifest},
	{"schema", checkIFEvalSchemas},
	{"ifeval", checkIFEval},
	{"signature", checkSignature},
}

func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func canonicalOf(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	c, err := contracts.CanonicalJSON(b)
	if err != nil {
		return nil
	}
	return c
}

func checkIFEval(v *view, fs *findings) {
	e := v.e
	data := func(p string) []byte {
		if d := e.docs[p]; d != nil {
			return d.data
		}
		return nil
	}
	// The contract: decodable, a released one, its hash recomputing.
	const kf = editions.ContractFile
	var kd editions.ContractDoc
	if err := strictJSON(data(kf), &kd); err != nil {
		fs.add(IDIFEvalContract, kf, "", "a contract document", nil, "contract.json: %v", err)
		return
	}
	k, err := contracts.IFEvalFromJSON(kd.Contract)
	if err != nil {
		fs.add(IDIFEvalContract, kf, "/contract", "an IFEval contract", nil, "%v", err)
		return
	}
	sum, _ := k.SHA256()
	if sum != kd.SHA256 || kd.ID != k.ID {
		fs.add(IDIFEvalContract, kf, "/sha256", sum, kd.SHA256, "the contract's canonical hash is %s; contract.json says %s (id %s)", sum, kd.SHA256, kd.ID)
	}
	if rel, err := contracts.EmbeddedIFEval(k.ID); err == nil {
		if rs, _ := rel.SHA256(); rs != sum {
			fs.add(IDIFEvalContract, kf, "/sha256", rs, sum, "%s as released has sha256 %s; this edition's contract is %s", k.ID, rs, sum)
		}
	}
	ins, err := ifevalPopulation(k)
	if err != nil {
		fs.add(IDIFEvalInput, kf, "/contract/input", ifeval.OfficialInputSHA256, k.Input.SHA256, "%v", err)
		return
	}
	if k.Scorer != ifeval.Rules.Version {
		fs.add(IDIFEvalRules, kf, "/contract/scorer", ifeval.Rules.Version, k.Scorer,
			"scored under %s; this verifier implements %s (use the horizon-verify of that rule set)", k.Scorer, ifeval.Rules.Version)
		return
	}
	// The campaign.
	const cf = editions.CampaignFile
	var cd editions.CampaignDoc
	if err := strictJSON(data(cf), &cd); err != nil {
		fs.add(IDIFEvalCampaign, cf, "", "a campaign document", nil, "campaign.json: %v", err)
		return
	}
	var ref struct {
		Edition     string               `json:"edition"`
		Evidence    string               `json:"evidence"`
		Publication string               `json:"publication"`
		Contract    editions.ContractRef `json:"contract"`
		Configs     []struct {
			ID       string `json:"id"`
			Capacity int    `json:"capacity"`
			Executor string `json:"executor"`
			KV       string `json:"kv"`
			Act      string `json:"expert_activations"`
			DenseAct string `json:"dense_activations"`
		} `json:"configurations"`
	}
	if err := json.Unmarshal(cd.Campaign, &ref); err != nil || ref.Contract.ID != k.ID || ref.Contract.SHA256 != sum {
		fs.add(IDIFEvalCampaign, cf, "/campaign/contract", k.ID+" "+sum, ref.Contract.ID+" "+ref.Contract.SHA256,
			"the campaign runs contract %s %s, the edition's contract is %s %s (%v)", ref.Contract.ID, ref.Contract.SHA256, k.ID, sum, err)
		return
	}
	c := &ref
	if c.Edition != e.Manifest.Edition || cd.Edition != e.Manifest.Edition {
		fs.add(IDIFEvalCampaign, cf, "/edition", e.Manifest.Edition, c.Edition, "the campaign names edition %s, the manifest %s", c.Edition, e.Manifest.Edition)
	}

	explained := map[string]bool{}
	var docs []editions.IFEvalConfig
	var build *editions.BuildInfo
	complete := true
	unchecked := 0
	for _, cfg := range ref.Configs {
		var shards []*editions.IFEvalShard
		ok := true
		for s := 1; s <= k.Shards(); s++ {
			p := editions.IFEvalShardPath(cfg.ID, s)
			explained[p] = true
			var sh editions.IFEvalShard
			if err := strictJSON(data(p), &sh); err != nil {
				fs.add(IDIFEvalShard, p, "", "a shard record", nil, "configuration %s shard %d: %v", cfg.ID, s, err)
				ok = false
				continue
			}
			if msg := shardProblem(k, sum, ins, cfg.ID, s, &sh); msg != "" {
				fs.add(IDIFEvalShard, p, "", nil, nil, "configuration %s shard %d: %s", cfg.ID, s, msg)
				ok = false
			} else {
				if lo, _ := k.ShardRange(s); !checkDecoding(fs, p, &sh, ins, lo) {
					unchecked++
				}
				checkShardTime(fs, p, &sh)
			}
			if sh.Edition != e.Manifest.Edition {
				fs.add(IDIFEvalShard, p, "/edition", e.Manifest.Edition, sh.Edition, "shard of edition %s in edition %s", sh.Edition, e.Manifest.Edition)
			}
			if sh.Setup.Capacity != cfg.Capacity || sh.Setup.Executor != cfg.Executor {
				fs.add(IDIFEvalSetup, p, "/setup", fmt.Sprintf("capacity %d, %s", cfg.Capacity, cfg.Executor),
					fmt.Sprintf("capacity %d, %s", sh.Setup.Capacity, sh.Setup.Executor),
					"configuration %s declares capacity %d with %s; shard %d ran capacity %d with %s", cfg.ID, cfg.Capacity, cfg.Executor, s, sh.Setup.Capacity, sh.Setup.Executor)
			}
			if want := declaredKV(cfg.KV); sh.Artifact.KVDTypeOf() != want {
				fs.add(IDIFEvalSetup, p, "/artifact/kv_dtype", want, sh.Artifact.KVDTypeOf(),
					"configuration %s declares a %s KV cache (kv %q); shard %d ran %s", cfg.ID, want, cfg.KV, s, sh.Artifact.KVDTypeOf())
			}
			if want := declaredExpertAct(cfg.Act); sh.Artifact.ExpertActivationDTypeOf() != want {
				fs.add(IDIFEvalSetup, p, "/artifact/expert_activation_dtype", want, sh.Artifact.ExpertActivationDTypeOf(),
					"configuration %s declares %s expert activations (expert_activations %q); shard %d ran %s", cfg.ID, want, cfg.Act, s, sh.Artifact.ExpertActivationDTypeOf())
			}
			if want := declaredDenseAct(cfg.DenseAct); sh.Artifact.DenseActivationDTypeOf() != want {
				fs.add(IDIFEvalSetup, p, "/artifact/dense_activation_dtype", want, sh.Artifact.DenseActivationDTypeOf(),
					"configuration %s declares %s dense activations (dense_activations %q); shard %d ran %s", cfg.ID, want, cfg.DenseAct, s, sh.Artifact.DenseActivationDTypeOf())
			}
			if build == nil {
				b := sh.Environment.Build
				build = &b
			} else if !slices.Equal(canonicalOf(*build), canonicalOf(sh.Environment.Build)) {
				fs.add(IDIFEvalSetup, p, "/environment/build", build.VCSRevision, sh.Environment.Build.VCSRevision,
					"shard %d of %s was generated by another build than the edition's first shard: one run, one build", s, cfg.ID)
			}
			shards = append(shards, &sh)
		}
		cp := editions.ConfigPath(cfg.ID)
		explained[cp] = true
		if !ok {
			complete = false
			continue
		}
		want, err := expectedConfig(ins, cfg.ID, shards)
		if err != nil {
			fs.add(IDIFEvalScore, cp, "", nil, nil, "configuration %s: %v", cfg.ID, err)
			complete = false
			continue
		}
		docs = append(docs, want)
		var got editions.IFEvalConfig
		if err := strictJSON(data(cp), &got); err != nil {
			fs.add(IDIFEvalScore, cp, "", "a configuration document", nil, "configuration %s: %v", cfg.ID, err)
			complete = false
			continue
		}
		compareIFEvalConfig(fs, cp, &want, &got)
	}
	for _, p := range e.paths {
		if (strings.HasPrefix(p, "raw/") || strings.HasPrefix(p, "configs/")) && !explained[p] {
			fs.add(IDIFEvalUnknown, p, "", "absent", "present", "%s belongs to no configuration or shard of the campaign", p)
		}
	}
	if !complete {
		return
	}
	// Claims and reports follow from the configuration documents.
	wantClaims := expectedClaims(c.Edition, c.Evidence, c.Publication, docs)
	var gotClaims editions.IFEvalClaims
	if err := strictJSON(data(editions.ClaimsFile), &gotClaims); err != nil {
		fs.add(IDIFEvalClaim, editions.ClaimsFile, "", "a claims document", nil, "claims.json: %v", err)
	} else if !bytes.Equal(canonicalOf(wantClaims), canonicalOf(gotClaims)) {
		msg := "claims.json does not recompute"
		for i := range max(len(wantClaims.Claims), len(gotClaims.Claims)) {
			if i >= len(wantClaims.Claims) || i >= len(gotClaims.Claims) {
				msg = fmt.Sprintf("claims.json has %d claims, the documents give %d", len(gotClaims.Claims), len(wantClaims.Claims))
				break
			}
			if !bytes.Equal(canonicalOf(wantClaims.Claims[i]), canonicalOf(gotClaims.Claims[i])) {
				msg = fmt.Sprintf("claim %s: recomputed %s, found %s", wantClaims.Claims[i].ID, canonicalOf(wantClaims.Claims[i]), canonicalOf(gotClaims.Claims[i]))
				break
			}
		}
		fs.add(IDIFEvalClaim, editions.ClaimsFile, "", nil, nil, "%s", msg)
	}
	checkIFEvalReports(fs, e, docs)
	if unchecked > 0 {
		fs.add(IDIFEvalText, "", "", nil, nil, "%d shard(s) name a tokenizer other than the synthetic byte-level one: their texts were re-scored as retained, but that each decodes from its token ids was not checked (the edition carries no tokenizer)", unchecked)
	}
}

// shardClockSlack is what the responses' seconds may exceed the shard's
// wall clock by: the two timestamps are taken with nanosecond resolution
// outside the timed generation, so any excess is a forged time.
const shardClockSlack = time.Millisecond

// checkShardTime bounds a shard's response times by its own wall clock:
// the worker times each response inside the span that started_at and
// finished_at enclose, one response after another, so their sum cannot be
// longer (a response rate raised by shortening seconds cannot be caught
// this way, only one that claims more time than the shard had is).
func checkShardTime(fs *findings, p string, sh *editions.IFEvalShard) {
	start, err1 := time.Parse(time.RFC3339Nano, sh.StartedAt)
	end, err2 := time.Parse(time.RFC3339Nano, sh.FinishedAt)
	if err := errors.Join(err1, err2); err != nil {
		fs.add(IDIFEvalTime, p, "/started_at", "RFC 3339 times", sh.StartedAt+" "+sh.FinishedAt, "shard %d: %v", sh.Shard, err)
		return
	}
	wall := end.Sub(start)
	if wall < 0 {
		fs.add(IDIFEvalTime, p, "/finished_at", "after "+sh.StartedAt, sh.FinishedAt, "shard %d finished %v before it started", sh.Shard, -wall)
		return
	}
	sum := 0.0
	for _, r := range sh.Responses {
		sum += r.Seconds
	}
	if resp := time.Duration(sum * float64(time.Second)); resp > wall+shardClockSlack {
		fs.add(IDIFEvalTime, p, "/responses", fmt.Sprintf("<= %.3f s", wall.Seconds()), fmt.Sprintf("%.3f s", sum),
			"shard %d's %d responses took %.3f s in all, longer than the shard's own wall clock of %.3f s (%s to %s)",
			sh.Shard, len(sh.Responses), sum, wall.Seconds(), sh.StartedAt, sh.FinishedAt)
	}
}

// checkDecoding checks a synthetic checkpoint's shard (its tokenizer is
// byte level, as the residency physics check assumes too): every text is
// its token ids decoded (byteLevelText), and every raw prompt's ids are its
// UTF-8 bytes. It returns false for any other checkpoint, whose tokenizer
// the edition does not carry.
func checkDecoding(fs *findings, p string, sh *editions.IFEvalShard, ins []ifeval.Input, lo int) bool {
	if sh.Checkpoint.Kind != "synthetic" {
		return false
	}
	eos := sh.Setup.Model.EOSTokenIDs
	for i, r := range sh.Responses {
		if got := byteLevelText(r.TokenIDs, eos); got != r.Text {
			fs.add(IDIFEvalDecode, p, ptr("responses", i)+"/text", got, r.Text, "key %d: the token ids decode to %.40q, the record's text is %.40q", r.Key, got, r.Text)
			return true
		}
		if sh.Setup.PromptFormat != contracts.FormatRaw || lo+i >= len(ins) {
			continue
		}
		text := ins[lo+i].Prompt
		bytesOK := len(r.PromptTokenIDs) == len(text)
		for j := 0; bytesOK && j < len(text); j++ {
			bytesOK = r.PromptTokenIDs[j] == int(text[j])
		}
		if !bytesOK {
			fs.add(IDIFEvalDecode, p, ptr("responses", i)+"/prompt_token_ids", len(text), len(r.PromptTokenIDs),
				"key %d: the prompt token ids are not the prompt's UTF-8 bytes", r.Key)
			return true
		}
	}
	return true
}

var ifevalCell = regexp.MustCompile(`<td[^>]*>(.*?)</td>`)

// checkIFEvalReports: both reports carry every configuration's four
// accuracies as the documents give them and, for a synthetic checkpoint,
// the warning that comes first; the plot is a PNG.
func checkIFEvalReports(fs *findings, e *Edition, docs []editions.IFEvalConfig) {
	ratio := func(r editions.IFEvalRatio) string {
		if r.Total == 0 {
			return "0/0"
		}
		return fmt.Sprintf("%d/%d (%.1f%%)", r.Followed, r.Total, 100*float64(r.Followed)/float64(r.Total))
	}
	for _, name := range []string{editions.ReportMD, editions.ReportHTML} {
		b, err := os.ReadFile(filepath.Join(e.Dir, name))
		if err != nil {
			fs.add(IDIFEvalReport, name, "", "present", "absent", "%s: %v", name, err)
			continue
		}
		text := string(b)
		rows := map[string][][]string{} // first cell -> rows' cells
		for _, line := range strings.Split(text, "\n") {
			var cells []string
			if name == editions.ReportHTML {
				for _, m := range ifevalCell.FindAllStringSubmatch(line, -1) {
					cells = append(cells, html.UnescapeString(m[1]))
				}
			} else if strings.HasPrefix(line, "|") {
				for _, c := range strings.Split(strings.Trim(line, "|"), "|") {
					cells = append(cells, strings.TrimSpace(c))
				}
			}
			if len(cells) >= 7 {
				rows[cells[0]] = append(rows[cells[0]], cells)
			}
		}
		for i := range docs {
			d := &docs[i]
			// the results table: id, checkpoint, format, then the four accuracies
			want := []string{ratio(d.Strict.PromptLevel), ratio(d.Strict.InstructionLevel), ratio(d.Loose.PromptLevel), ratio(d.Loose.InstructionLevel)}
			found := false
			for _, cells := range rows[d.ID] {
				found = found || slices.Equal(cells[3:7], want)
			}
			if !found {
				fs.add(IDIFEvalReport, name, "", strings.Join(want, ", "), nil,
					"%s has no results row for %s showing its accuracies %s (strict prompt, instruction; loose prompt, instruction)", name, d.ID, strings.Join(want, ", "))
			}
			if d.Checkpoint.Kind == "synthetic" && !strings.Contains(text, "Read this first") {
				fs.add(IDIFEvalReport, name, "", "the synthetic-checkpoint warning", nil, "%s does not say first that %s's checkpoint is synthetic", name, d.ID)
			}
		}
	}
	const plot = "plots/ifeval_categories.png"
	b, err := os.ReadFile(filepath.Join(e.Dir, filepath.FromSlash(plot)))
	if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		fs.add(IDIFEvalReport, plot, "", "a PNG", nil, "%s is missing or not a PNG (%v)", plot, err)
	}
}

// compareIFEvalConfig reports the first difference of each kind between a
// recomputed configuration document and the edition's.
func compareIFEvalConfig(fs *findings, p string, want, got *editions.IFEvalConfig) {
	if bytes.Equal(canonicalOf(want), canonicalOf(got)) {
		return
	}
	byKey := map[int]editions.IFEvalVerdict{}
	for _, v := range got.Verdicts {
		byKey[v.Key] = v
	}
	for i, w := range want.Verdicts {
		g, ok := byKey[w.Key]
		if !ok || !slices.Equal(w.Strict, g.Strict) || !slices.Equal(w.Loose, g.Loose) || !slices.Equal(w.InstructionIDList, g.InstructionIDList) {
			fs.add(IDIFEvalVerdict, p, ptr("verdicts", i), canonicalOf(w), canonicalOf(g),
				"key %d: the retained response re-scores to strict %v loose %v; the document says strict %v loose %v", w.Key, w.Strict, w.Loose, g.Strict, g.Loose)
			break
		}
	}
	if len(got.Verdicts) != len(want.Verdicts) {
		fs.add(IDIFEvalVerdict, p, "/verdicts", len(want.Verdicts), len(got.Verdicts), "%d verdicts, the shards give %d", len(got.Verdicts), len(want.Verdicts))
	}
	w2, g2 := *want, *got
	w2.Verdicts, g2.Verdicts = nil, nil
	if !bytes.Equal(canonicalOf(w2), canonicalOf(g2)) {
		var wm, gm map[string]json.RawMessage
		_ = json.Unmarshal(canonicalOf(w2), &wm)
		_ = json.Unmarshal(canonicalOf(g2), &gm)
		var keys []string
		for key := range wm {
			if !bytes.Equal(wm[key], gm[key]) {
				keys = append(keys, key)
			}
		}
		slices.Sort(keys)
		for _, key := range keys {
			fs.add(IDIFEvalScore, p, "/"+key, json.RawMessage(wm[key]), json.RawMessage(gm[key]), "%s does not recompute from the shards", key)
		}
	}
}

// ifevalCounts are the summary counts of an IFEval edition: configurations,
// shard records, responses and claims (what decodes).
func ifevalCounts(e *Edition) (configs, shards, responses, claims int) {
	for _, p := range e.paths {
		d := e.docs[p]
		if d == nil {
			continue
		}
		switch {
		case strings.HasPrefix(p, "configs/"):
			configs++
		case strings.HasPrefix(p, "raw/"):
			var s editions.IFEvalShard
			if strictJSON(d.data, &s) == nil {
				shards++
				responses += len(s.Responses)
			}
		case p == editions.ClaimsFile:
			var c editions.IFEvalClaims
			if strictJSON(d.data, &c) == nil {
				claims = len(c.Claims)
			}
		}
	}
	return
}

// ifevalSchemaOf is the schema an IFEval edition's document at p must name.
func ifevalSchemaOf(p string) string {
	switch {
	case p == editions.ContractFile:
		return editions.SchemaIFEvalContract
	case p == editions.CampaignFile:
		return editions.SchemaCampaign
	case p == editions.ClaimsFile:
		return editions.SchemaIFEvalClaims
	case strings.HasPrefix(p, "configs/"):
		return editions.SchemaIFEvalConfig
	case strings.HasPrefix(p, "raw/"):
		return editions.SchemaIFEvalShard
	}
	return ""
}

// checkIFEvalSchemas validates every JSON document of an IFEval edition
// (the manifest has its own check) against the schema its path calls for.
func checkIFEvalSchemas(v *view, fs *findings) {
	checkSchemasByPath(v, fs, ifevalSchemaOf, "an IFEval edition")
}
