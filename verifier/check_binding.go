package verifier

import (
	"fmt"
	"slices"
	"strings"

	"github.com/horizon-runmap/horizon/editions"
)

// Check binding: what the claims, the contract and the campaign are bound
// to. Check 5 (claims) proves that each claim's value is what its source
// says; this check proves that the source is the right one. Without it a
// forger points a claim at a number that suits them (claims.json itself,
// another configuration's document), rewrites the statement, raises the
// evidence level, marks it reproduced or drops an awkward claim, and every
// value still resolves. It also pins the contract to the ones this project
// releases (releasedContracts) and, on request, the frozen campaign to its
// YAML file.
var (
	IDBindingClaimUnknown = def("binding", "binding.claim-unknown", Error,
		"a claim's id is not <config>.<metric> for a configuration of the edition and a metric the runner claims (its source cannot be bound)")
	IDBindingClaimSource = def("binding", "binding.claim-source", Error,
		"a claim's source is not its own configuration's document: claim <config>.<metric> must cite configs/<config>.json#/metrics/<metric>")
	IDBindingClaimRatio = def("binding", "binding.claim-ratio", Error,
		"a claim's numerator or denominator is not the pair its metric is defined by (decode_tokens/decode_seconds, output_tokens/runtime_seconds of its own configuration; none for the others)")
	IDBindingClaimInterval = def("binding", "binding.claim-interval", Error,
		"a claim carries an interval its configuration has none for, or its bounds, algorithm or level are not its configuration's uncertainty")
	IDBindingClaimIntervalAbsent = def("binding", "binding.claim-interval-absent", Hint,
		"a pooled decode or TTFT mean claim states no interval though its configuration carries one: claims written before claims carried intervals (republish the edition), or an interval removed")
	IDBindingClaimTerms = def("binding", "binding.claim-terms", Error,
		"a claim's unit or decimals differ from the ones its metric is claimed with")
	IDBindingStatement = def("binding", "binding.statement", Error,
		"a claim's statement differs from the statement regenerated from its configuration document")
	IDBindingClaimMissing = def("binding", "binding.claim-missing", Error,
		"a required claim is absent (pooled decode, overall output, TTFT mean and H2D bytes of every configuration; RSS and VRAM peaks where observed)")
	IDBindingStatusRaised = def("binding", "binding.status-raised", Error,
		"a claim's evidence or publication is above the campaign's (E1<E2<E3<E4, internal<public)")
	IDBindingReproduction = def("binding", "binding.reproduction-in-edition", Error,
		"a claim's reproduction is not not_attempted: an edition never records its own reproduction (a reproduction is a separate record, see --reproduction)")
	IDBindingContractUnpinned = def("binding", "binding.contract-unpinned", Error,
		"the edition's contract is not one this project releases (unknown id, or a released id with another canonical hash) and no --contract file names it")
	IDBindingContractFile = def("binding", "binding.contract-file", Error,
		"the contract file given (--contract) cannot be read, or its canonical hash is not the edition's contract's")
	IDBindingContractExplicit = def("binding", "binding.contract-explicit", Hint,
		"the edition's contract is not a released one; it was accepted because it is exactly the contract file given (--contract)")
	IDBindingCampaignFile = def("binding", "binding.campaign-file", Error,
		"the frozen campaign is not the campaign file given (--campaign): a declared key is absent or differs, or the configurations differ, or the file cannot be read")
)

// claimMetric is one metric the runner claims per configuration
// (report.Claims (campaigns/report)), written again here: its unit and decimals, the
// pointers of its ratio, whether a configuration must claim it, and its
// statement.
type claimMetric struct {
	name     string
	unit     string
	decimals int
	num, den string // "" when the value is not a ratio
	// required reports whether configuration d must carry this claim.
	required func(d *editions.ConfigDoc) bool
	// statement is the claim's text after "<who>: ".
	statement func(d *editions.ConfigDoc) string
}

func always(*editions.ConfigDoc) bool { return true }

var claimMetrics = []claimMetric{
	{"pooled_decode_tok_s", "tokens/s", 2, "/metrics/decode_tokens", "/metrics/decode_seconds",
		// One output token per request: no decode interval, no rate, no claim.
		func(d *editions.ConfigDoc) bool { return d.Metrics.PooledDecodeTokS.Ok() },
		func(d *editions.ConfigDoc) string {
			return fmt.Sprintf("pooled decode rate over %d measured requests, sum(N-1) / sum(decode seconds), first-token wait excluded", d.Requests)
		}},
	{"overall_output_tok_s", "tokens/s", 2, "/metrics/output_tokens", "/metrics/runtime_seconds", always,
		func(d *editions.ConfigDoc) string {
			return fmt.Sprintf("overall output rate over %d measured requests, sum(N) / sum(runtime seconds), admission to last token", d.Requests)
		}},
	{"ttft_mean_s", "s", 4, "", "", always,
		func(d *editions.ConfigDoc) string {
			return fmt.Sprintf("mean time to first token (admission to first token, prefill included) over %d measured requests", d.Requests)
		}},
	{"prefill_tok_s", "tokens/s", 2, "/metrics/prefill/prompt_tokens", "/metrics/prefill/seconds",
		func(d *editions.ConfigDoc) bool { return d.Metrics.Prefill != nil && d.Metrics.Prefill.TokS.Ok() },
		func(d *editions.ConfigDoc) string {
			return fmt.Sprintf("isolated prefill rate over %d measured requests, sum(prompt tokens) / sum(prefill seconds), admission to the prompt's last logits before selection", d.Requests)
		}},
	{"h2d_bytes", "bytes", 0, "", "", always,
		func(d *editions.ConfigDoc) string {
			return fmt.Sprintf("host-to-device expert bytes summed over %d measured requests (not a rate)", d.Requests)
		}},
	{"rss_peak_bytes", "bytes", 0, "", "", func(d *editions.ConfigDoc) bool { return d.Metrics.RSSPeakBytes.Ok() },
		func(d *editions.ConfigDoc) string {
			return fmt.Sprintf("whole-worker RSS peak (VmHWM), maximum over %d workers", d.Blocks)
		}},
	{"vram_peak_bytes", "bytes", 0, "", "", func(d *editions.ConfigDoc) bool { return d.Metrics.VRAMPeakBytes.Ok() },
		func(d *editions.ConfigDoc) string {
			return fmt.Sprintf("device-wide whole-worker VRAM peak (preparation and warmup included), maximum over %d workers", d.Blocks)
		}},
}

// source is the claim's source pointer in its configuration document:
// /metrics/<name>, or the member of the prefill group for prefill_tok_s.
func (m claimMetric) source() string {
	if m.name == "prefill_tok_s" {
		return "/metrics/prefill/tok_s"
	}
	return "/metrics/" + m.name
}

func claimMetricNamed(name string) (claimMetric, bool) {
	for _, m := range claimMetrics {
		if m.name == name {
			return m, true
		}
	}
	return claimMetric{}, false
}

// claimStatement regenerates the statement of claim <d.ID>.<m.name> from
// the configuration document alone. TestClaimStatementsMatchRunner holds it
// to report.Claims (campaigns/report).
func claimStatement(d *editions.ConfigDoc, m claimMetric) string {
	who := fmt.Sprintf("%s (%s, capacity %d/%d, %s, %s)", d.ID, editions.CheckpointLabel(d.Checkpoint), d.Capacity, d.ExpertsPerLayer, d.Executor, d.Device)
	return who + ": " + m.statement(d)
}

func checkBinding(v *view, fs *findings) {
	checkClaimBinding(v, fs)
	checkContractPinned(v, fs)
	checkCampaignFile(v, fs)
}

// checkClaimBinding binds every claim to its configuration and metric, its
// statuses to the campaign's, and requires every required claim.
func checkClaimBinding(v *view, fs *findings) {
	const f = editions.ClaimsFile
	cd := v.e.claims
	if cd == nil {
		return // absent or undecodable: checks 2 and 5 report it
	}
	evidence, publication := campaignStatus(v)
	have := map[string]bool{}
	for i, c := range cd.Claims {
		p := ptr("claims", i)
		have[c.ID] = true
		if rank(editions.EvidenceLevels, c.Evidence) > rank(editions.EvidenceLevels, evidence) {
			fs.add(IDBindingStatusRaised, f, p+"/evidence", evidence, c.Evidence,
				"claim %s: evidence %s is above the campaign's %s", c.ID, c.Evidence, evidence)
		}
		if rank(editions.PublicationStates, c.Publication) > rank(editions.PublicationStates, publication) {
			fs.add(IDBindingStatusRaised, f, p+"/publication", publication, c.Publication,
				"claim %s: publication %s is above the campaign's %s", c.ID, c.Publication, publication)
		}
		if c.Reproduction != "not_attempted" {
			fs.add(IDBindingReproduction, f, p+"/reproduction", "not_attempted", c.Reproduction,
				"claim %s: an edition cannot record its own reproduction; a reproduction is a separate record (horizon-bench reproduce)", c.ID)
		}

		cfgID, metric, _ := strings.Cut(c.ID, ".")
		if strings.HasPrefix(metric, lengthClaimPrefix) || strings.HasPrefix(metric, depthClaimPrefix) {
			checkLengthClaim(fs, p, c, cfgID, metric, v.byID[cfgID])
			continue
		}
		m, known := claimMetricNamed(metric)
		cv := v.byID[cfgID]
		if !known || cv == nil || cv.doc == nil {
			fs.add(IDBindingClaimUnknown, f, p+"/id", "<config>.<metric>", c.ID,
				"claim %s does not name a configuration of the edition and a claimable metric (%s)", c.ID, claimMetricNames())
			continue
		}
		d := cv.doc
		file := editions.ConfigPath(cfgID)
		if c.Source.File != file || c.Source.Pointer != m.source() {
			fs.add(IDBindingClaimSource, f, p+"/source", file+"#"+m.source(), c.Source.File+"#"+c.Source.Pointer,
				"claim %s must be sourced from its own configuration's %s", c.ID, metric)
		}
		for _, r := range []struct {
			member, want string
			ref          *editions.SourceRef
		}{{"numerator", m.num, c.Numerator}, {"denominator", m.den, c.Denominator}} {
			switch {
			case r.want == "" && r.ref != nil:
				fs.add(IDBindingClaimRatio, f, p+"/"+r.member, nil, r.ref.File+"#"+r.ref.Pointer,
					"claim %s: %s is not a ratio and carries no %s", c.ID, metric, r.member)
			case r.want != "" && r.ref == nil:
				fs.add(IDBindingClaimRatio, f, p+"/"+r.member, file+"#"+r.want, nil,
					"claim %s: %s is a ratio; its %s must be cited", c.ID, metric, r.member)
			case r.want != "" && (r.ref.File != file || r.ref.Pointer != r.want):
				fs.add(IDBindingClaimRatio, f, p+"/"+r.member, file+"#"+r.want, r.ref.File+"#"+r.ref.Pointer,
					"claim %s: the %s of %s is %s of its own configuration", c.ID, r.member, metric, r.want)
			}
		}
		checkClaimInterval(fs, f, p, c, metric, file, d)
		if c.Unit != m.unit || c.Decimals != m.decimals {
			fs.add(IDBindingClaimTerms, f, p, map[string]any{"unit": m.unit, "decimals": m.decimals},
				map[string]any{"unit": c.Unit, "decimals": c.Decimals}, "claim %s: %s is claimed in %s to %d decimals", c.ID, metric, m.unit, m.decimals)
		}
		if want := claimStatement(d, m); c.Statement != want {
			fs.add(IDBindingStatement, f, p+"/statement", want, c.Statement,
				"claim %s: the statement must be the one its configuration document gives", c.ID)
		}
	}
	for _, cv := range v.configs {
		if cv.doc == nil {
			continue
		}
		for _, m := range claimMetrics {
			if id := cv.id + "." + m.name; m.required(cv.doc) && !have[id] {
				fs.add(IDBindingClaimMissing, f, "/claims", id, nil,
					"configuration %s has no claim %s", cv.id, id)
			}
		}
		for _, lc := range lengthClaims(cv.doc) {
			if !have[lc.id] {
				fs.add(IDBindingClaimMissing, f, "/claims", lc.id, nil,
					"configuration %s has no claim %s", cv.id, lc.id)
			}
		}
	}
}

// lengthClaimPrefix starts the metric part of a prompt length's claims:
// <config>.prefill_lengths.<prompt id>.mean_tok_s (with the bootstrap-v1
// interval of its entry) and .median_tok_s, where the entry's rates were
// observed.
const lengthClaimPrefix = "prefill_lengths."

// depthClaimPrefix starts the metric part of a context depth's claims:
// <config>.decode_depths.<prompt id>.pooled_tok_s (a ratio, with the
// bootstrap-v1 interval of its entry), .mean_tok_s, .median_tok_s and
// .tpot_s, where the entry's decode was observed.
const depthClaimPrefix = "decode_depths."

// lengthClaim is one per-prompt claim (a prompt length's prefill rate or a
// context depth's decode) a configuration document requires, written again
// here (report.PrefillLengthClaims, report.DecodeDepthClaims).
type lengthClaim struct {
	id, source string
	statement  string
	unit       string
	decimals   int
	// iv is the entry's interval where the claim carries it (the mean
	// prefill rate, the pooled decode rate), else nil.
	iv     *editions.PrefillInterval
	lo, hi string
	// num, den are the cited numerator and denominator of a ratio (the
	// pooled decode rate), "" otherwise.
	num, den string
}

// lengthClaims are d's per-prompt claims, in document order: the prompt
// lengths' then the depths'.
func lengthClaims(d *editions.ConfigDoc) []lengthClaim {
	var out []lengthClaim
	who := fmt.Sprintf("%s (%s, capacity %d/%d, %s, %s)", d.ID, editions.CheckpointLabel(d.Checkpoint), d.Capacity, d.ExpertsPerLayer, d.Executor, d.Device)
	for i, pl := range d.Metrics.PrefillLengths {
		if !pl.MeanTokS.Ok() || !pl.MedianTokS.Ok() || pl.Interval == nil {
			continue
		}
		base := fmt.Sprintf("/metrics/prefill_lengths/%d/", i)
		for _, stat := range []string{"mean", "median"} {
			lc := lengthClaim{
				id: d.ID + "." + lengthClaimPrefix + pl.PromptID + "." + stat + "_tok_s", source: base + stat + "_tok_s",
				statement: who + ": " + fmt.Sprintf("%s isolated prefill rate of the %d-token prompt %s over %d measured requests, prompt tokens / prefill seconds per request, admission to the prompt's last logits before selection",
					stat, pl.PromptTokens, pl.PromptID, pl.Requests),
				unit: "tokens/s", decimals: 2,
			}
			if stat == "mean" {
				lc.iv, lc.lo, lc.hi = pl.Interval, base+"interval/lo", base+"interval/hi"
			}
			out = append(out, lc)
		}
	}
	for i, dd := range d.Metrics.DecodeDepths {
		if !dd.PooledTokS.Ok() || !dd.MeanTokS.Ok() || !dd.MedianTokS.Ok() || !dd.TPOTS.Ok() || dd.Interval == nil {
			continue
		}
		base := fmt.Sprintf("/metrics/decode_depths/%d/", i)
		for _, x := range []struct {
			stat, what, unit string
			decimals         int
		}{
			{"pooled_tok_s", "pooled decode rate, sum(N-1) / sum(decode seconds),", "tokens/s", 2},
			{"mean_tok_s", "mean of the per-request decode rates (N-1) / decode seconds", "tokens/s", 2},
			{"median_tok_s", "median of the per-request decode rates (N-1) / decode seconds", "tokens/s", 2},
			{"tpot_s", "time per output token after the first, sum(decode seconds) / sum(N-1),", "s", 6},
		} {
			lc := lengthClaim{
				id: d.ID + "." + depthClaimPrefix + dd.PromptID + "." + x.stat, source: base + x.stat,
				statement: who + ": " + fmt.Sprintf("%s at context depth %d (prompt %s) over %d measured requests, first token to last: the depth's prefill and the first-token wait excluded",
					x.what, dd.DepthTokens, dd.PromptID, dd.Requests),
				unit: x.unit, decimals: x.decimals,
			}
			if x.stat == "pooled_tok_s" {
				lc.iv, lc.lo, lc.hi = dd.Interval, base+"interval/lo", base+"interval/hi"
				lc.num, lc.den = base+"decode_tokens", base+"decode_seconds"
			}
			out = append(out, lc)
		}
	}
	return out
}

// checkLengthClaim binds a prompt length claim to its configuration's
// entry: its source, no ratio, tokens/s to 2 decimals, the mean's interval
// (and none on the median), and the regenerated statement.
func checkLengthClaim(fs *findings, p string, c editions.Claim, cfgID, metric string, cv *configView) {
	const f = editions.ClaimsFile
	var want *lengthClaim
	if cv != nil && cv.doc != nil {
		for _, lc := range lengthClaims(cv.doc) {
			if lc.id == c.ID {
				want = &lc
				break
			}
		}
	}
	if want == nil {
		fs.add(IDBindingClaimUnknown, f, p+"/id", "<config>.prefill_lengths.<prompt>.{mean,median}_tok_s or <config>.decode_depths.<prompt>.{pooled,mean,median}_tok_s|tpot_s", c.ID,
			"claim %s does not name a configuration of the edition and one of its observed prompt lengths or depths", c.ID)
		return
	}
	file := editions.ConfigPath(cfgID)
	if c.Source.File != file || c.Source.Pointer != want.source {
		fs.add(IDBindingClaimSource, f, p+"/source", file+"#"+want.source, c.Source.File+"#"+c.Source.Pointer,
			"claim %s must be sourced from its own configuration's %s", c.ID, metric)
	}
	for _, r := range []struct {
		member, want string
		ref          *editions.SourceRef
	}{{"numerator", want.num, c.Numerator}, {"denominator", want.den, c.Denominator}} {
		switch {
		case r.want == "" && r.ref != nil:
			fs.add(IDBindingClaimRatio, f, p+"/"+r.member, nil, "a ratio", "claim %s: %s is a mean, median or time, not a cited ratio", c.ID, metric)
		case r.want != "" && r.ref == nil:
			fs.add(IDBindingClaimRatio, f, p+"/"+r.member, file+"#"+r.want, nil, "claim %s: %s is a ratio; its %s must be cited", c.ID, metric, r.member)
		case r.want != "" && (r.ref.File != file || r.ref.Pointer != r.want):
			fs.add(IDBindingClaimRatio, f, p+"/"+r.member, file+"#"+r.want, r.ref.File+"#"+r.ref.Pointer,
				"claim %s: the %s of %s is %s of its own configuration", c.ID, r.member, metric, r.want)
		}
	}
	iv := c.Interval
	switch {
	case want.iv == nil && iv != nil:
		fs.add(IDBindingClaimInterval, f, p+"/interval", nil, iv.Algorithm, "claim %s: %s carries no interval", c.ID, metric)
	case want.iv != nil && iv == nil:
		fs.add(IDBindingClaimInterval, f, p+"/interval", "the bootstrap interval of "+file+"#"+strings.TrimSuffix(want.lo, "/lo"), nil,
			"claim %s: the interval is part of the claim", c.ID)
	case want.iv != nil:
		if iv.Algorithm != want.iv.Algorithm || iv.Level != want.iv.Level || iv.Lo.File != file || iv.Hi.File != file || iv.Lo.Pointer != want.lo || iv.Hi.Pointer != want.hi {
			fs.add(IDBindingClaimInterval, f, p+"/interval",
				map[string]any{"algorithm": want.iv.Algorithm, "level": want.iv.Level, "lo": file + "#" + want.lo, "hi": file + "#" + want.hi},
				map[string]any{"algorithm": iv.Algorithm, "level": iv.Level, "lo": iv.Lo.File + "#" + iv.Lo.Pointer, "hi": iv.Hi.File + "#" + iv.Hi.Pointer},
				"claim %s: the interval must be its own prompt's bounds", c.ID)
		}
	}
	if c.Unit != want.unit || c.Decimals != want.decimals {
		fs.add(IDBindingClaimTerms, f, p, map[string]any{"unit": want.unit, "decimals": want.decimals},
			map[string]any{"unit": c.Unit, "decimals": c.Decimals}, "claim %s: %s is claimed in %s to %d decimals", c.ID, metric, want.unit, want.decimals)
	}
	if c.Statement != want.statement {
		fs.add(IDBindingStatement, f, p+"/statement", want.statement, c.Statement,
			"claim %s: the statement must be the one its configuration document gives", c.ID)
	}
}

// intervalMetrics are the claims that carry their configuration's
// bootstrap interval.
var intervalMetrics = []string{"pooled_decode_tok_s", "ttft_mean_s"}

// checkClaimInterval binds a claim's interval to its configuration's
// uncertainty: present exactly for the interval metrics of a configuration
// with one, citing /uncertainty/<metric>/lo and /hi of its own document,
// under that uncertainty's algorithm and level (check claims resolves the
// bounds' values).
func checkClaimInterval(fs *findings, f, p string, c editions.Claim, metric, file string, d *editions.ConfigDoc) {
	want := d.Uncertainty != nil && slices.Contains(intervalMetrics, metric)
	iv := c.Interval
	switch {
	case want && iv == nil:
		fs.add(IDBindingClaimIntervalAbsent, f, p+"/interval", "the bootstrap interval of "+file, nil,
			"claim %s: its configuration carries a %s interval the claim does not state", c.ID, d.Uncertainty.Algorithm)
	case !want && iv != nil:
		fs.add(IDBindingClaimInterval, f, p+"/interval", nil, iv.Algorithm,
			"claim %s: %s has no interval in its configuration document", c.ID, metric)
	case want:
		u := d.Uncertainty
		lo, hi := "/uncertainty/"+metric+"/lo", "/uncertainty/"+metric+"/hi"
		if iv.Algorithm != u.Algorithm || iv.Level != u.Level || iv.Lo.File != file || iv.Hi.File != file || iv.Lo.Pointer != lo || iv.Hi.Pointer != hi {
			fs.add(IDBindingClaimInterval, f, p+"/interval",
				map[string]any{"algorithm": u.Algorithm, "level": u.Level, "lo": file + "#" + lo, "hi": file + "#" + hi},
				map[string]any{"algorithm": iv.Algorithm, "level": iv.Level, "lo": iv.Lo.File + "#" + iv.Lo.Pointer, "hi": iv.Hi.File + "#" + iv.Hi.Pointer},
				"claim %s: the interval must be its own configuration's %s bounds", c.ID, metric)
		}
	}
}

func claimMetricNames() string {
	var out []string
	for _, m := range claimMetrics {
		out = append(out, m.name)
	}
	return strings.Join(out, ", ")
}

// campaignStatus returns the campaign's evidence and publication. A frozen
// campaign without them (or with an invalid one) gets the loader's defaults,
// E1 and internal, the lowest levels: a claim is then held to the least.
func campaignStatus(v *view) (evidence, publication string) {
	cd := v.e.docs[editions.CampaignFile]
	evidence, publication = cd.str("/campaign/evidence"), cd.str("/campaign/publication")
	if !slices.Contains(editions.EvidenceLevels, evidence) {
		evidence = editions.EvidenceLevels[0]
	}
	if !slices.Contains(editions.PublicationStates, publication) {
		publication = editions.PublicationStates[0]
	}
	return evidence, publication
}

// rank is the position of s in an ordered list of levels; an unknown value
// (check 5 reports it) ranks lowest.
func rank(levels []string, s string) int { return slices.Index(levels, s) }

// checkContractPinned holds the edition's contract to a released one, or to
// the contract file given.
func checkContractPinned(v *view, fs *findings) {
	const f = editions.ContractFile
	cd := v.e.docs[f]
	if cd == nil || cd.tree == nil {
		return // check 3 reports it
	}
	body, err := resolve(cd.tree, "/contract")
	if err != nil {
		return
	}
	sha, err := CanonicalHash(body)
	if err != nil {
		return // check 3 reports it
	}
	id := cd.str("/id")
	released, known := releasedContracts[id]
	pinned := known && released == sha
	if file := v.opts.ContractFile; file != "" {
		fid, fsha, err := contractFileHash(file)
		switch {
		case err != nil:
			fs.add(IDBindingContractFile, f, "", file, nil, "the contract file given cannot be used: %v", err)
		case fsha != sha:
			fs.add(IDBindingContractFile, f, "/contract", map[string]string{"id": fid, "sha256": fsha},
				map[string]string{"id": id, "sha256": sha}, "the edition's contract is not the contract in %s", file)
		case !pinned:
			fs.add(IDBindingContractExplicit, f, "/contract", nil, map[string]string{"id": id, "sha256": sha},
				"contract %s (sha256 %s) is not released; accepted as the contract in %s", id, sha, file)
		}
		return
	}
	if pinned {
		return
	}
	want := "a released contract (" + releasedList() + ")"
	if known {
		want = released
	}
	fs.add(IDBindingContractUnpinned, f, "/contract", want, map[string]string{"id": id, "sha256": sha},
		"the edition's contract %s (canonical sha256 %s) is not one this project releases: pass --contract FILE to verify against it explicitly", id, sha)
}

func releasedList() string {
	var out []string
	for id, sha := range releasedContracts {
		out = append(out, id+" "+sha)
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// checkCampaignFile holds the frozen campaign to the campaign YAML given
// (Options.CampaignFile). The verifier cannot import the campaign loader,
// so the comparison is generic (compareDeclared): every key the YAML
// declares is in the frozen campaign with an equal value, and the
// configurations are the same ids in the same order. Keys the frozen
// campaign adds are taken as the loader's defaults (expert_format,
// transport, prefetch, overlap, placement, policy, evidence, publication,
// threads, spares, staging): a known weak spot, since a forged "default"
// that the YAML leaves unsaid is not caught here (check 3 still holds the
// workers to the frozen campaign, and the contract to its own terms).
func checkCampaignFile(v *view, fs *findings) {
	file := v.opts.CampaignFile
	if file == "" {
		return
	}
	const f = editions.CampaignFile
	declared, err := readYAMLTree(file)
	if err != nil {
		fs.add(IDBindingCampaignFile, f, "", file, nil, "the campaign file given cannot be used: %v", err)
		return
	}
	dm, ok := declared.(map[string]any)
	if !ok {
		fs.add(IDBindingCampaignFile, f, "", file, nil, "%s is not a campaign (a mapping)", file)
		return
	}
	cd := v.e.docs[f]
	if cd == nil || cd.tree == nil {
		fs.add(IDBindingCampaignFile, f, "", file, nil, "the edition has no readable frozen campaign to compare with %s", file)
		return
	}
	frozen, err := resolve(cd.tree, "/campaign")
	fm, ok := frozen.(map[string]any)
	if err != nil || !ok {
		fs.add(IDBindingCampaignFile, f, "/campaign", file, nil, "the frozen campaign has no /campaign object to compare with %s", file)
		return
	}
	wantIDs, gotIDs := configIDList(dm["configurations"]), configIDList(fm["configurations"])
	rest := dm
	if !slices.Equal(wantIDs, gotIDs) {
		fs.add(IDBindingCampaignFile, f, "/campaign/configurations", wantIDs, gotIDs,
			"the frozen campaign's configurations are not those of %s (same ids, same order)", file)
		rest = map[string]any{}
		for k, x := range dm {
			if k != "configurations" {
				rest[k] = x
			}
		}
	}
	var diffs []declaredMismatch
	compareDeclared("/campaign", rest, fm, &diffs)
	for _, d := range diffs {
		fs.add(IDBindingCampaignFile, f, d.pointer, d.want, d.found, "the frozen campaign departs from %s here: %s", file, d.why)
	}
}

// configIDList lists the ids of a generic configurations list.
func configIDList(x any) []string {
	arr, _ := x.([]any)
	out := []string{}
	for _, c := range arr {
		m, _ := c.(map[string]any)
		id, _ := m["id"].(string)
		out = append(out, id)
	}
	return out
}
