package verifier

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
	"github.com/horizon-runmap/horizon/fidelity"
	"github.com/horizon-runmap/horizon/ifeval"
)

// Fidelity editions (contracts FIDELITY-v1 and FIDELITY-SMOKE-v1) get the
// manifest and signature checks of every edition and, in place of the
// residency checks, check fidelity: both arms' retained responses are
// re-scored on the CPU, every paired verdict, count, McNemar p-value and
// divergence summary is recomputed from the shard records (package
// fidelity, the writer's own functions, on the retained values), and the
// claims and reports are held to them.
//
// What cannot be recomputed: each position's KL(ref || trt) and max
// |logit difference| need both full next-token distributions, which the
// edition does not keep. They are checked for internal consistency only
// (fidelity.CheckPosition: KL at least the KL of the stored top-k and the
// rest, max |logit difference| at least the stored ids' differences, the
// top-1 flag equal to the stored argmaxes' comparison, log-probabilities
// their logits less one constant per arm, the reference's argmax its
// greedy token). IDFidelityPartial says so in every report.
var (
	IDFidelityContract = def("fidelity", "fidelity.contract", Error, "contract.json is not a released fidelity contract, or its hash does not recompute")
	IDFidelityInput    = def("fidelity", "fidelity.input", Error, "the contract's prompt file hash or population differs from the official IFEval input this verifier embeds")
	IDFidelityRules    = def("fidelity", "fidelity.rules", Error, "the edition was scored under another rule set than this verifier's scorer: its verdicts cannot be recomputed")
	IDFidelityCampaign = def("fidelity", "fidelity.campaign", Error, "campaign.json is unreadable, names another contract, or its configurations do not form arm pairs (fp16 reference, int4 treatment, equal otherwise)")
	IDFidelityShard    = def("fidelity", "fidelity.shard", Error, "a shard record is missing, unreadable, out of place, or breaks the contract (arms, prompts, endings, forced positions fed the reference's tokens, positions consistent with their top-k)")
	IDFidelitySetup    = def("fidelity", "fidelity.setup", Error, "an arm ran another configuration, capacity, executor, expert format, KV cache element type or expert or dense activation dtype than the campaign's, or the shards come from more than one build")
	IDFidelityVerdict  = def("fidelity", "fidelity.verdict", Error, "a retained response re-scores, or a prompt pairs, to other verdicts than the paired document says")
	IDFidelityPaired   = def("fidelity", "fidelity.paired", Error, "a paired document's counts, McNemar p-values or divergence summaries do not recompute from its shards")
	IDFidelityClaim    = def("fidelity", "fidelity.claim", Error, "claims.json does not recompute from the paired documents")
	IDFidelityReport   = def("fidelity", "fidelity.report", Error, "report.md or report.html does not show a pair's paired counts, McNemar p and KL as its document gives them (or the synthetic warning first), or the plot is not a PNG")
	IDFidelityUnknown  = def("fidelity", "fidelity.unexpected-file", Error, "a raw or paired file that no arm pair of the campaign explains")
	IDFidelityTime     = def("fidelity", "fidelity.time", Error, "a shard's started_at/finished_at do not parse or run backwards, or its requests' seconds add up to more than that wall clock")
	IDFidelityDecode   = def("fidelity", "fidelity.decode", Error, "a response's text is not what its token ids decode to under a synthetic checkpoint's byte-level tokenizer")
	IDFidelityPartial  = def("fidelity", "fidelity.partial", Hint, "per-position KL and max |logit difference| are checked for consistency with the stored top-k only (lower bounds), not recomputed: the full distributions are not kept")
)

// isFidelityEdition reports whether the edition's contract.json names a
// fidelity contract.
func isFidelityEdition(e *Edition) bool {
	d := e.docs[editions.ContractFile]
	return d != nil && d.tree != nil && contracts.IsFidelity(d.str("/id"))
}

// fidelityRuns are the checks of a fidelity edition.
var fidelityRuns = []struct {
	name string
	run  func(*view, *findings)
}{
	{"manifest", checkManifest},
	{"schema", checkFidelitySchemas},
	{"fidelity", checkFidelity},
	{"signature", checkSignature},
}

// fidelityCampaign is what the verifier reads of a fidelity campaign.
type fidelityCampaign struct {
	Edition     string               `json:"edition"`
	Evidence    string               `json:"evidence"`
	Publication string               `json:"publication"`
	Contract    editions.ContractRef `json:"contract"`
	Configs     []json.RawMessage    `json:"configurations"`
}

// fidelityConfig is one configuration's terms the checks name.
type fidelityConfig struct {
	ID           string `json:"id"`
	ExpertFormat string `json:"expert_format"`
	Capacity     int    `json:"capacity"`
	Executor     string `json:"executor"`
	KV           string `json:"kv"`
	ExpertAct    string `json:"expert_activations"`
	DenseAct     string `json:"dense_activations"`
	rest         string // canonical JSON without id and expert_format
}

// fidelityPairs pairs a campaign's configurations by arm: every treatment
// (expert_format = the contract's treatment) with the one reference whose
// other terms are equal. It returns the problem as a message.
func fidelityPairs(k *contracts.Fidelity, raws []json.RawMessage) ([][2]fidelityConfig, string) {
	var refs, trts []fidelityConfig
	for i, r := range raws {
		var c fidelityConfig
		var m map[string]any
		if err := json.Unmarshal(r, &c); err != nil {
			return nil, fmt.Sprintf("configuration %d: %v", i, err)
		}
		if err := json.Unmarshal(r, &m); err != nil {
			return nil, fmt.Sprintf("configuration %d: %v", i, err)
		}
		delete(m, "id")
		delete(m, "expert_format")
		c.rest = string(canonicalOf(m))
		switch c.ExpertFormat {
		case k.Arms.Reference:
			refs = append(refs, c)
		case k.Arms.Treatment:
			trts = append(trts, c)
		default:
			return nil, fmt.Sprintf("configuration %s: expert_format %q is neither arm", c.ID, c.ExpertFormat)
		}
	}
	used := map[string]bool{}
	var out [][2]fidelityConfig
	for _, t := range trts {
		var match []fidelityConfig
		for _, r := range refs {
			if r.rest == t.rest {
				match = append(match, r)
			}
		}
		if len(match) != 1 || used[match[0].ID] {
			return nil, fmt.Sprintf("configuration %s: %d reference arms equal to it but for expert_format", t.ID, len(match))
		}
		used[match[0].ID] = true
		out = append(out, [2]fidelityConfig{match[0], t})
	}
	if len(out) == 0 || len(used) != len(refs) {
		return nil, fmt.Sprintf("%d treatment and %d reference configurations do not pair one to one", len(trts), len(refs))
	}
	return out, ""
}

func checkFidelity(v *view, fs *findings) {
	e := v.e
	data := func(p string) []byte {
		if d := e.docs[p]; d != nil {
			return d.data
		}
		return nil
	}
	const kf = editions.ContractFile
	var kd editions.ContractDoc
	if err := strictJSON(data(kf), &kd); err != nil {
		fs.add(IDFidelityContract, kf, "", "a contract document", nil, "contract.json: %v", err)
		return
	}
	k, err := contracts.FidelityFromJSON(kd.Contract)
	if err != nil {
		fs.add(IDFidelityContract, kf, "/contract", "a fidelity contract", nil, "%v", err)
		return
	}
	sum, _ := k.SHA256()
	if sum != kd.SHA256 || kd.ID != k.ID {
		fs.add(IDFidelityContract, kf, "/sha256", sum, kd.SHA256, "the contract's canonical hash is %s; contract.json says %s (id %s)", sum, kd.SHA256, kd.ID)
	}
	if rel, err := contracts.EmbeddedFidelity(k.ID); err == nil {
		if rs, _ := rel.SHA256(); rs != sum {
			fs.add(IDFidelityContract, kf, "/sha256", rs, sum, "%s as released has sha256 %s; this edition's contract is %s", k.ID, rs, sum)
		}
	}
	ins, err := fidelity.Inputs(k)
	if err != nil {
		fs.add(IDFidelityInput, kf, "/contract/input", ifeval.OfficialInputSHA256, k.Input.SHA256, "%v", err)
		return
	}
	if k.Scorer != ifeval.Rules.Version {
		fs.add(IDFidelityRules, kf, "/contract/scorer", ifeval.Rules.Version, k.Scorer,
			"scored under %s; this verifier implements %s (use the horizon-verify of that rule set)", k.Scorer, ifeval.Rules.Version)
		return
	}
	const cf = editions.CampaignFile
	var cd editions.CampaignDoc
	if err := strictJSON(data(cf), &cd); err != nil {
		fs.add(IDFidelityCampaign, cf, "", "a campaign document", nil, "campaign.json: %v", err)
		return
	}
	var c fidelityCampaign
	if err := json.Unmarshal(cd.Campaign, &c); err != nil || c.Contract.ID != k.ID || c.Contract.SHA256 != sum {
		fs.add(IDFidelityCampaign, cf, "/campaign/contract", k.ID+" "+sum, c.Contract.ID+" "+c.Contract.SHA256,
			"the campaign runs contract %s %s, the edition's contract is %s %s (%v)", c.Contract.ID, c.Contract.SHA256, k.ID, sum, err)
		return
	}
	if c.Edition != e.Manifest.Edition || cd.Edition != e.Manifest.Edition {
		fs.add(IDFidelityCampaign, cf, "/edition", e.Manifest.Edition, c.Edition, "the campaign names edition %s, the manifest %s", c.Edition, e.Manifest.Edition)
	}
	pairs, msg := fidelityPairs(k, c.Configs)
	if msg != "" {
		fs.add(IDFidelityCampaign, cf, "/campaign/configurations", "arm pairs", nil, "%s", msg)
		return
	}

	explained := map[string]bool{}
	var docs []editions.FidelityPair
	var build *editions.BuildInfo
	complete := true
	for _, pr := range pairs {
		ref, trt := pr[0], pr[1]
		var shards []*editions.FidelityShard
		ok := true
		for s := 1; s <= k.Shards(); s++ {
			p := editions.FidelityShardPath(trt.ID, s)
			explained[p] = true
			var sh editions.FidelityShard
			if err := strictJSON(data(p), &sh); err != nil {
				fs.add(IDFidelityShard, p, "", "a shard record", nil, "pair %s shard %d: %v", trt.ID, s, err)
				ok = false
				continue
			}
			if err := fidelity.CheckShard(k, sum, ins, trt.ID, s, &sh); err != nil {
				fs.add(IDFidelityShard, p, "", nil, nil, "%v", err)
				ok = false
			} else {
				checkFidelityDecoding(fs, p, &sh)
				checkFidelityTime(fs, p, &sh)
			}
			if sh.Edition != e.Manifest.Edition {
				fs.add(IDFidelityShard, p, "/edition", e.Manifest.Edition, sh.Edition, "shard of edition %s in edition %s", sh.Edition, e.Manifest.Edition)
			}
			for _, a := range []struct {
				name string
				want fidelityConfig
				got  *editions.FidelityArm
			}{{"reference", ref, &sh.Reference}, {"treatment", trt, &sh.Treatment}} {
				g := a.got
				wantArt := campaignExpertFormats[a.want.ExpertFormat]
				if g.ConfigID != a.want.ID || g.ExpertFormat != a.want.ExpertFormat || g.Artifact.ExpertFormat != wantArt ||
					g.Setup.Capacity != a.want.Capacity || g.Setup.Executor != a.want.Executor || g.Artifact.KVDTypeOf() != declaredKV(a.want.KV) ||
					g.Artifact.ExpertActivationDTypeOf() != declaredExpertAct(a.want.ExpertAct) || g.Artifact.DenseActivationDTypeOf() != declaredDenseAct(a.want.DenseAct) {
					fs.add(IDFidelitySetup, p, "/"+a.name, fmt.Sprintf("%s: %s (%s), capacity %d, %s, %s KV, %s expert activations, %s dense activations", a.want.ID, a.want.ExpertFormat, wantArt, a.want.Capacity, a.want.Executor, declaredKV(a.want.KV), declaredExpertAct(a.want.ExpertAct), declaredDenseAct(a.want.DenseAct)),
						fmt.Sprintf("%s: %s (%s), capacity %d, %s, %s KV, %s expert activations, %s dense activations", g.ConfigID, g.ExpertFormat, g.Artifact.ExpertFormat, g.Setup.Capacity, g.Setup.Executor, g.Artifact.KVDTypeOf(), g.Artifact.ExpertActivationDTypeOf(), g.Artifact.DenseActivationDTypeOf()),
						"pair %s shard %d: the %s arm is not the campaign's configuration %s as declared", trt.ID, s, a.name, a.want.ID)
					ok = false
				}
			}
			if build == nil {
				b := sh.Environment.Build
				build = &b
			} else if !slices.Equal(canonicalOf(*build), canonicalOf(sh.Environment.Build)) {
				fs.add(IDFidelitySetup, p, "/environment/build", build.VCSRevision, sh.Environment.Build.VCSRevision,
					"shard %d of %s was generated by another build than the edition's first shard: one run, one build", s, trt.ID)
			}
			shards = append(shards, &sh)
		}
		pp := editions.FidelityPairPath(trt.ID)
		explained[pp] = true
		if !ok {
			complete = false
			continue
		}
		want, err := fidelity.Aggregate(k, ins, trt.ID, shards)
		if err != nil {
			fs.add(IDFidelityPaired, pp, "", nil, nil, "pair %s: %v", trt.ID, err)
			complete = false
			continue
		}
		docs = append(docs, want)
		var got editions.FidelityPair
		if err := strictJSON(data(pp), &got); err != nil {
			fs.add(IDFidelityPaired, pp, "", "a paired document", nil, "pair %s: %v", trt.ID, err)
			complete = false
			continue
		}
		compareFidelityPair(fs, pp, &want, &got)
	}
	for _, p := range e.paths {
		if (strings.HasPrefix(p, "raw/") || strings.HasPrefix(p, "paired/")) && !explained[p] {
			fs.add(IDFidelityUnknown, p, "", "absent", "present", "%s belongs to no arm pair or shard of the campaign", p)
		}
	}
	if !complete {
		return
	}
	wantClaims := fidelity.ClaimsOf(c.Edition, c.Evidence, c.Publication, docs)
	var gotClaims editions.FidelityClaims
	if err := strictJSON(data(editions.ClaimsFile), &gotClaims); err != nil {
		fs.add(IDFidelityClaim, editions.ClaimsFile, "", "a claims document", nil, "claims.json: %v", err)
	} else if !bytes.Equal(canonicalOf(wantClaims), canonicalOf(gotClaims)) {
		msg := "claims.json does not recompute"
		for i := range max(len(wantClaims.Claims), len(gotClaims.Claims)) {
			if i >= len(wantClaims.Claims) || i >= len(gotClaims.Claims) {
				msg = fmt.Sprintf("claims.json has %d claims, the paired documents give %d", len(gotClaims.Claims), len(wantClaims.Claims))
				break
			}
			if !bytes.Equal(canonicalOf(wantClaims.Claims[i]), canonicalOf(gotClaims.Claims[i])) {
				msg = fmt.Sprintf("claim %s: recomputed %s, found %s", wantClaims.Claims[i].ID, canonicalOf(wantClaims.Claims[i]), canonicalOf(gotClaims.Claims[i]))
				break
			}
		}
		fs.add(IDFidelityClaim, editions.ClaimsFile, "", nil, nil, "%s", msg)
	}
	checkFidelityReports(fs, e, docs)
	positions := 0
	for _, d := range docs {
		positions += d.Positions
	}
	fs.add(IDFidelityPartial, "", "", nil, nil,
		"the %d per-position KL and max |logit difference| values were checked against each position's stored top-%d (lower bounds, argmaxes, one log-normaliser per arm), not recomputed; every aggregate over them was", positions, k.TopK)
}

// compareFidelityPair reports a recomputed paired document's differences
// from the edition's: the first prompt whose verdicts differ, then each
// top-level member that differs.
func compareFidelityPair(fs *findings, p string, want, got *editions.FidelityPair) {
	if bytes.Equal(canonicalOf(want), canonicalOf(got)) {
		return
	}
	for i, w := range want.Prompts {
		if i >= len(got.Prompts) {
			break
		}
		g := got.Prompts[i]
		if w.Key != g.Key || w.Strict != g.Strict || w.Loose != g.Loose || w.Identical != g.Identical ||
			!slices.Equal(w.RefStrict, g.RefStrict) || !slices.Equal(w.TrtStrict, g.TrtStrict) ||
			!slices.Equal(w.RefLoose, g.RefLoose) || !slices.Equal(w.TrtLoose, g.TrtLoose) {
			fs.add(IDFidelityVerdict, p, ptr("prompts", i), canonicalOf(w), canonicalOf(g),
				"key %d: the retained responses re-score and pair to strict %s, loose %s (identical %v); the document says strict %s, loose %s (identical %v)",
				w.Key, w.Strict, w.Loose, w.Identical, g.Strict, g.Loose, g.Identical)
			break
		}
	}
	var wm, gm map[string]json.RawMessage
	_ = json.Unmarshal(canonicalOf(want), &wm)
	_ = json.Unmarshal(canonicalOf(got), &gm)
	var keys []string
	for key := range wm {
		if !bytes.Equal(wm[key], gm[key]) {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	for _, key := range keys {
		fs.add(IDFidelityPaired, p, "/"+key, json.RawMessage(wm[key]), json.RawMessage(gm[key]), "%s does not recompute from the shards", key)
	}
}

// checkFidelityTime bounds a shard's requests by its own wall clock: the
// worker runs each arm's requests and the forced ones one after another
// inside the span started_at and finished_at enclose.
func checkFidelityTime(fs *findings, p string, sh *editions.FidelityShard) {
	wall, err := fidelity.ShardWall(sh)
	if err != nil {
		fs.add(IDFidelityTime, p, "/finished_at", "RFC 3339 times, finished after started", sh.StartedAt+" "+sh.FinishedAt, "shard %d: %v", sh.Shard, err)
		return
	}
	sum := 0.0
	for _, r := range sh.Reference.Responses {
		sum += r.Seconds
	}
	for _, r := range sh.Treatment.Responses {
		sum += r.Seconds
	}
	for _, f := range sh.Forced {
		sum += f.Seconds
	}
	if d := time.Duration(sum * float64(time.Second)); d > wall+shardClockSlack {
		fs.add(IDFidelityTime, p, "/forced", fmt.Sprintf("<= %.3f s", wall.Seconds()), fmt.Sprintf("%.3f s", sum),
			"shard %d's requests took %.3f s in all, longer than the shard's own wall clock of %.3f s", sh.Shard, sum, wall.Seconds())
	}
}

// checkFidelityDecoding checks both arms' texts against their token ids
// under a synthetic checkpoint's byte-level tokenizer (nothing for any
// other checkpoint: the edition carries no tokenizer).
func checkFidelityDecoding(fs *findings, p string, sh *editions.FidelityShard) {
	for _, a := range []struct {
		name string
		arm  *editions.FidelityArm
	}{{"reference", &sh.Reference}, {"treatment", &sh.Treatment}} {
		if a.arm.Checkpoint.Kind != "synthetic" {
			continue
		}
		for i, r := range a.arm.Responses {
			if got := byteLevelText(r.TokenIDs, a.arm.Setup.Model.EOSTokenIDs); got != r.Text {
				fs.add(IDFidelityDecode, p, "/"+a.name+ptr("responses", i)+"/text", got, r.Text, "%s key %d: the token ids decode to %.40q, the record's text is %.40q", a.name, r.Key, got, r.Text)
				return
			}
		}
	}
}

// checkFidelityReports: both reports say first that synthetic checkpoints
// make the structural outcomes meaningless, and show each pair's strict
// paired counts, McNemar p and pooled KL median as its document gives
// them; the plot is a PNG.
func checkFidelityReports(fs *findings, e *Edition, docs []editions.FidelityPair) {
	for _, name := range []string{editions.ReportMD, editions.ReportHTML} {
		b, err := os.ReadFile(filepath.Join(e.Dir, name))
		if err != nil {
			fs.add(IDFidelityReport, name, "", "present", "absent", "%s: %v", name, err)
			continue
		}
		text := string(b)
		for i := range docs {
			d := &docs[i]
			n := d.Strict.Prompts
			p := "UNKNOWN"
			if d.Strict.McNemarP != nil {
				p = fmt.Sprintf("%.4g", *d.Strict.McNemarP)
			}
			for _, want := range []string{
				d.ID,
				fmt.Sprintf("%d / %d / %d / %d", n.BothPass, n.BothFail, n.Regression, n.Improvement),
				p,
				fmt.Sprintf("%.3g [%.3g, %.3g]", d.KL.Median.Value, d.KL.Median.CI.Lo, d.KL.Median.CI.Hi),
			} {
				if !strings.Contains(text, want) {
					fs.add(IDFidelityReport, name, "", want, nil, "%s does not show %q for pair %s as its paired document gives it", name, want, d.ID)
				}
			}
			if d.Checkpoint.Kind == "synthetic" {
				first := strings.Index(text, "Read this first")
				if first < 0 || strings.Contains(text[:first], "<table") || strings.Contains(text[:first], "| ---") {
					fs.add(IDFidelityReport, name, "", "the synthetic-checkpoint warning first", nil, "%s does not say before its tables that %s's checkpoint is synthetic", name, d.ID)
				}
			}
		}
	}
	const plot = "plots/fidelity_kl_by_position.png"
	b, err := os.ReadFile(filepath.Join(e.Dir, filepath.FromSlash(plot)))
	if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		fs.add(IDFidelityReport, plot, "", "a PNG", nil, "%s is missing or not a PNG (%v)", plot, err)
	}
}

// fidelityCounts are the summary counts of a fidelity edition: arm
// configurations, shard records, responses (both arms) and claims.
func fidelityCounts(e *Edition) (configs, shards, responses, claims int) {
	for _, p := range e.paths {
		d := e.docs[p]
		if d == nil {
			continue
		}
		switch {
		case strings.HasPrefix(p, "paired/"):
			configs += 2
		case strings.HasPrefix(p, "raw/"):
			var s editions.FidelityShard
			if strictJSON(d.data, &s) == nil {
				shards++
				responses += len(s.Reference.Responses) + len(s.Treatment.Responses)
			}
		case p == editions.ClaimsFile:
			var c editions.FidelityClaims
			if strictJSON(d.data, &c) == nil {
				claims = len(c.Claims)
			}
		}
	}
	return
}

// fidelitySchemaOf is the schema a fidelity edition's document at p must
// name.
func fidelitySchemaOf(p string) string {
	switch {
	case p == editions.ContractFile:
		return editions.SchemaFidelityContract
	case p == editions.CampaignFile:
		return editions.SchemaCampaign
	case p == editions.ClaimsFile:
		return editions.SchemaFidelityClaims
	case strings.HasPrefix(p, "paired/"):
		return editions.SchemaFidelityPair
	case strings.HasPrefix(p, "raw/"):
		return editions.SchemaFidelityShard
	}
	return ""
}

// checkFidelitySchemas validates every JSON document of a fidelity edition
// (the manifest has its own check) against the schema its path calls for.
func checkFidelitySchemas(v *view, fs *findings) {
	checkSchemasByPath(v, fs, fidelitySchemaOf, "a fidelity edition")
}
