package verifier

import (
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/horizon-runmap/horizon/editions"
)

// Check 3: the edition follows its frozen contract. The contract's own hash
// recomputes; the campaign's configurations are exactly the configs/ files;
// each configuration has the declared blocks, each block the declared
// prompts in order, each measured request exactly N tokens with no EOS and
// consistent timestamps, and the warmup is marked and kept out.
func checkContract(v *view, fs *findings) {
	e := v.e
	t := v.terms
	cd := e.docs[editions.ContractFile]
	switch {
	case cd == nil:
		fs.add(IDContractMissing, editions.ContractFile, "", "present", "absent",
			"the edition has no contract.json: contract conformance cannot be checked")
	case cd.tree == nil:
		fs.add(IDContractMissing, editions.ContractFile, "", "a JSON document", nil, "contract.json does not parse")
	default:
		checkFrozenHash(cd, "/contract", IDContractHash, "contract", fs)
		for _, p := range t.problems {
			fs.add(IDContractTerms, editions.ContractFile, p[0], p[1], nil, "the contract does not state %s at %s", p[1], p[0])
		}
	}
	checkCampaign(v, fs)

	// Stray files under raw/ that are no raw record path.
	for _, p := range e.paths {
		if strings.HasPrefix(p, "raw/") {
			if _, _, ok := parseRawPath(p); !ok {
				fs.add(IDContractBlockExtra, p, "", "raw/<config>/block-<k>.json", p, "%s is not a raw record path", p)
			}
		}
	}
	var noEOS []string
	for _, c := range v.configs {
		noEOS = append(noEOS, checkConfigBlocks(v, c, t, fs)...)
	}
	if len(noEOS) > 0 {
		fs.add(IDContractEOSUnknown, noEOS[0], "/setup/model/eos_token_ids", "the model's EOS ids", []int{},
			"%d of %d raw records list no EOS token ids (first: %s): EOS suppression was not verified there",
			len(noEOS), len(e.raws), noEOS[0])
	}
}

// checkFrozenHash recomputes the canonical hash of the member at body of a
// frozen document (contract.json, campaign.json) and compares it with the
// document's "sha256".
func checkFrozenHash(d *doc, body, id, what string, fs *findings) {
	x, err := resolve(d.tree, body)
	if err != nil {
		fs.add(id, d.path, body, "the frozen "+what, nil, "%s has no %s member to hash", d.path, body)
		return
	}
	got, err := CanonicalHash(x)
	carried := d.str("/sha256")
	switch {
	case err != nil:
		fs.add(id, d.path, body, "canonical JSON", nil, "cannot canonicalise the %s: %v", what, err)
	case carried == "":
		fs.add(id, d.path, "/sha256", got, nil, "the frozen %s carries no hash", what)
	case got != carried:
		fs.add(id, d.path, "/sha256", got, carried,
			"the canonical SHA-256 of %s#%s is not the hash it carries: the %s was edited after it was frozen", d.path, body, what)
	}
}

// checkCampaign checks the frozen campaign: its hash, the contract it names,
// and its configurations against configs/ and the raw records.
func checkCampaign(v *view, fs *findings) {
	e := v.e
	const f = editions.CampaignFile
	cd := e.docs[f]
	if cd == nil {
		fs.add(IDContractMissing, f, "", "present", "absent", "the edition has no campaign.json")
	} else if cd.tree != nil {
		checkFrozenHash(cd, "/campaign", IDContractCampaignHash, "campaign", fs)
		if t := v.terms; t != nil {
			id, sha := cd.str("/campaign/contract/id"), cd.str("/campaign/contract/sha256")
			if id != t.ID || sha != t.SHA256 {
				fs.add(IDContractRef, f, "/campaign/contract", map[string]string{"id": t.ID, "sha256": t.SHA256},
					map[string]string{"id": id, "sha256": sha}, "the campaign names another contract than contract.json")
			}
		}
		for _, p := range []string{"/edition", "/campaign/edition"} {
			if got := cd.str(p); got != e.Manifest.Edition {
				fs.add(IDManifestEditionID, f, p, e.Manifest.Edition, got, "campaign of another edition")
			}
		}
	}
	declared, ok := campaignConfigs(cd)
	if cd != nil && cd.tree != nil && !ok {
		fs.add(IDContractCampaign, f, "/campaign/configurations", "a list of {id}", nil,
			"campaign.json lists no configurations the verifier can read; configs/ was not compared with the campaign")
	}
	device := cd.str("/campaign/device")
	inCampaign := map[string]bool{}
	for _, cc := range declared {
		inCampaign[cc.id] = true
		c := v.byID[cc.id]
		if c == nil || e.entries[c.path] == nil {
			fs.add(IDContractConfigMissing, editions.ConfigPath(cc.id), "", "present", "absent",
				"the campaign declares configuration %s but the edition has no %s", cc.id, editions.ConfigPath(cc.id))
		}
		if c == nil {
			continue
		}
		checkAgainstCampaign(c, cc, device, fs)
	}
	checkContractPolicy(v, fs)
	for _, c := range v.configs {
		hasDoc := e.entries[c.path] != nil
		switch {
		case hasDoc && ok && !inCampaign[c.id]:
			fs.add(IDContractConfigExtra, c.path, "", "a configuration of the campaign", c.id,
				"%s is not a configuration of the campaign", c.id)
		case !hasDoc && !inCampaign[c.id]:
			fs.add(IDContractConfigMissing, c.path, "", "present", "absent",
				"raw records exist for %s but the edition has no %s", c.id, c.path)
		}
	}
}

// checkContractPolicy holds every configuration's declared policy and every
// worker's setup.policy to the contract: its cache.policy, or one of the
// cache.policies it admits (PERF-POLICY-v1). A worker that ran another
// policy than the contract's is not measured under it, however consistent
// its counters (the replay uses the policy the record declares).
func checkContractPolicy(v *view, fs *findings) {
	t := v.terms
	if t == nil || len(t.Policies) == 0 {
		return
	}
	for _, c := range v.configs {
		if d := c.doc; d != nil && !t.admitsPolicy(d.Policy) {
			fs.add(IDContractPolicy, c.path, "/policy", t.Policies, d.Policy,
				"configuration %s declares policy %q; contract %s admits %v", c.id, d.Policy, t.ID, t.Policies)
		}
		for _, w := range c.workers {
			if p := w.rec.Setup.Policy; !t.admitsPolicy(p) {
				fs.add(IDContractPolicy, w.path, "/setup/policy", t.Policies, p,
					"the worker ran policy %q; contract %s admits %v", p, t.ID, t.Policies)
			}
		}
	}
}

// checkAgainstCampaign holds a configuration's document and workers to what
// the campaign declares for it.
func checkAgainstCampaign(c *configView, cc campaignConfig, device string, fs *findings) {
	const f = editions.CampaignFile
	base := ptr("campaign", "configurations", cc.index)
	if d := c.doc; d != nil {
		for _, x := range []struct {
			member   string
			doc, cmp any
			check    bool
		}{
			{"capacity", d.Capacity, cc.capacity, cc.hasCapacity},
			{"executor", d.Executor, cc.executor, cc.executor != ""},
			{"seed_executor", d.SeedExecutor, cc.seedExecutor, true},
			{"placement", d.Placement, cc.placement, cc.placement != ""},
			{"policy", d.Policy, cc.policy, cc.policy != ""},
			{"device", d.Device, device, device != ""},
		} {
			if x.check && x.doc != x.cmp {
				fs.add(IDContractCampaignConfig, c.path, "/"+x.member, x.cmp, x.doc,
					"the campaign (%s#%s) declares %s %v for %s", f, base, x.member, x.cmp, c.id)
			}
		}
	}
	for _, w := range c.workers {
		s := w.rec.Setup
		if (cc.hasCapacity && s.Capacity != cc.capacity) || (cc.executor != "" && s.Executor != cc.executor) ||
			(cc.placement != "" && s.Placement != cc.placement) || (cc.policy != "" && s.Policy != cc.policy) {
			fs.add(IDContractCampaignConfig, w.path, "/setup",
				map[string]any{"capacity": cc.capacity, "executor": cc.executor, "placement": cc.placement, "policy": cc.policy},
				map[string]any{"capacity": s.Capacity, "executor": s.Executor, "placement": s.Placement, "policy": s.Policy},
				"the worker ran another setup than the campaign declares")
		}
		if device != "" && w.rec.Environment.Device != device {
			fs.add(IDContractCampaignConfig, w.path, "/environment/device", device, w.rec.Environment.Device,
				"the worker ran on another device than the campaign's")
		}
	}
}

// checkConfigBlocks checks one configuration's blocks, warmups and requests.
// It returns the raw records that list no EOS ids.
func checkConfigBlocks(v *view, c *configView, t *contractTerms, fs *findings) (noEOS []string) {
	e := v.e
	if t != nil && t.Blocks >= 1 {
		if c.doc != nil && c.doc.Blocks != t.Blocks {
			fs.add(IDContractBlockCount, c.path, "/blocks", t.Blocks, c.doc.Blocks,
				"the contract declares %d blocks per configuration", t.Blocks)
		}
		want := make([]string, 0, t.Blocks)
		for k := 1; k <= t.Blocks; k++ {
			p := editions.RawPath(c.id, k)
			want = append(want, p)
			if e.entries[p] == nil {
				fs.add(IDContractBlockMissing, p, "", "present", "absent",
					"configuration %s has no raw record for block %d of %d", c.id, k, t.Blocks)
			}
		}
		for _, p := range c.rawPaths {
			if _, k, _ := parseRawPath(p); k > t.Blocks {
				fs.add(IDContractBlockExtra, p, "", t.Blocks, k, "block %d is beyond the contract's %d blocks", k, t.Blocks)
			}
		}
		if c.doc != nil && !slices.Equal(c.doc.Workers, want) {
			fs.add(IDContractWorkers, c.path, "/workers", want, c.doc.Workers,
				"workers must list the configuration's raw records in block order")
		}
	}

	var first *worker
	for _, w := range c.workers {
		r := w.rec
		if r.ConfigID != c.id {
			fs.add(IDContractRecordIdentity, w.path, "/config_id", c.id, r.ConfigID, "raw record filed under another configuration")
		}
		if r.Block != w.block {
			fs.add(IDContractRecordIdentity, w.path, "/block", w.block, r.Block, "raw record filed under another block")
		}
		if t != nil && (r.Contract.ID != t.ID || r.Contract.SHA256 != t.SHA256) {
			fs.add(IDContractRef, w.path, "/contract", map[string]string{"id": t.ID, "sha256": t.SHA256},
				map[string]string{"id": r.Contract.ID, "sha256": r.Contract.SHA256},
				"the worker ran under another contract than the edition's contract.json")
		}
		checkSetup(w, fs)
		if first == nil {
			first = w
		} else {
			checkSameSetup(first, w, fs)
		}
		if t != nil {
			checkWarmup(w, t, fs)
		}
		eos, known := v.eosFor(w)
		if !known {
			noEOS = append(noEOS, w.path)
		}
		checkRequests(w, t, eos, fs)
		if t != nil {
			checkObservations(w, t, fs)
		}
	}
	return noEOS
}

// checkSetup checks a worker's residency setup on its own.
func checkSetup(w *worker, fs *findings) {
	s := w.rec.Setup
	want := "partial"
	if s.Capacity == s.Model.ExpertsPerLayer {
		want = "full"
	}
	if s.Regime != want {
		fs.add(IDContractSetup, w.path, "/setup/regime", want, s.Regime,
			"regime is \"full\" exactly when capacity (%d) equals experts per layer (%d)", s.Capacity, s.Model.ExpertsPerLayer)
	}
	if s.Capacity < s.Model.TopK || s.Capacity > s.Model.ExpertsPerLayer || s.Capacity < 1 {
		fs.add(IDContractSetup, w.path, "/setup/capacity",
			"top_k.."+itoa(s.Model.ExpertsPerLayer), s.Capacity, "capacity must hold a routed group and at most every expert")
	}
}

// checkSameSetup checks that two workers of one configuration ran the same
// thing.
func checkSameSetup(a, b *worker, fs *findings) {
	ra, rb := a.rec, b.rec
	for _, f := range []struct {
		ptr      string
		want, is any
	}{
		{"/setup", ra.Setup, rb.Setup},
		{"/checkpoint", ra.Checkpoint, rb.Checkpoint},
		{"/artifact", ra.Artifact, rb.Artifact},
		{"/environment/device", ra.Environment.Device, rb.Environment.Device},
	} {
		if !reflect.DeepEqual(f.want, f.is) {
			fs.add(IDContractSetup, b.path, f.ptr, f.want, f.is,
				"workers of one configuration must run the same setup (differs from %s)", a.path)
		}
	}
}

func checkWarmup(w *worker, t *contractTerms, fs *findings) {
	wu := w.rec.Warmup
	if !wu.Excluded {
		fs.add(IDContractWarmupMeasured, w.path, "/warmup/excluded", true, false,
			"the warmup must be marked excluded: it is never a measured request")
	}
	if t.WarmupPromptID != "" && wu.PromptID != t.WarmupPromptID {
		fs.add(IDContractWarmup, w.path, "/warmup/prompt_id", t.WarmupPromptID, wu.PromptID, "warmup prompt differs from the contract's")
	}
	if t.WarmupTokens >= 0 && wu.N != t.WarmupTokens {
		fs.add(IDContractWarmup, w.path, "/warmup/n", t.WarmupTokens, wu.N, "warmup token count differs from the contract's")
	}
	if len(wu.TokenIDs) != wu.N {
		fs.add(IDContractWarmup, w.path, "/warmup/token_ids", wu.N, len(wu.TokenIDs), "warmup token_ids must hold n tokens")
	}
	for i, r := range w.rec.Requests {
		if wu.N > 0 && r.PromptID == wu.PromptID && slices.Equal(r.TokenIDs, wu.TokenIDs) {
			fs.add(IDContractWarmupMeasured, w.path, ptr("requests", i), "no copy of the warmup", r.PromptID,
				"measured request %d is the warmup (same prompt and tokens): warmup counted as measured", i)
		}
	}
}

// checkRequests checks a block's measured requests against the contract.
func checkRequests(w *worker, t *contractTerms, eos []int, fs *findings) {
	reqs := w.rec.Requests
	// The block's prompts: the contract's, less the where-held ones the
	// model's context (setup.model.max_positions) cannot hold.
	var run []int
	if t != nil {
		run = t.runs(w.rec.Setup.Model.MaxPositions)
	}
	if t != nil && len(t.Prompts) > 0 && len(reqs) != len(run) {
		fs.add(IDContractRequestCount, w.path, "/requests", len(run), len(reqs),
			"a block holds one measured request per contract prompt its model's context holds (where-held prompts beyond setup.model.max_positions %d are not run)", w.rec.Setup.Model.MaxPositions)
	}
	vocab := w.rec.Setup.Model.Vocab
	for i, r := range reqs {
		p := ptr("requests", i)
		if r.Index != i {
			fs.add(IDContractRequestIndex, w.path, p+"/index", i, r.Index, "request index must be its position in the block")
		}
		if t != nil && i < len(run) && r.PromptID != t.Prompts[run[i]] {
			fs.add(IDContractPromptOrder, w.path, p+"/prompt_id", t.Prompts[run[i]], r.PromptID,
				"request %d must be contract prompt %q (prompts run in contract order)", i, t.Prompts[run[i]])
		}
		if t.declaredLengths() && i < len(run) && run[i] < len(t.PromptTokens) && r.PromptTokens != t.PromptTokens[run[i]] {
			fs.add(IDContractPromptLength, w.path, p+"/prompt_tokens", t.PromptTokens[run[i]], r.PromptTokens,
				"request %d runs prompt %s, which the contract declares %d tokens long", i, t.Prompts[run[i]], t.PromptTokens[run[i]])
		}
		if r.PromptTokens != len(r.PromptTokenIDs) || r.PromptTokens == 0 {
			fs.add(IDContractPromptTokens, w.path, p+"/prompt_tokens", len(r.PromptTokenIDs), r.PromptTokens,
				"prompt_tokens must be the (non-zero) length of prompt_token_ids")
		}
		if t != nil && t.OutputTokens >= 1 && r.N != t.OutputTokens {
			fs.add(IDContractTokenCount, w.path, p+"/n", t.OutputTokens, r.N,
				"every measured request produces exactly N = %d tokens", t.OutputTokens)
		}
		if len(r.TokenIDs) != r.N {
			fs.add(IDContractTokenCount, w.path, p+"/token_ids", r.N, len(r.TokenIDs), "token_ids must hold n tokens")
		}
		if len(r.TokenNs) != r.N {
			fs.add(IDContractTokenCount, w.path, p+"/token_ns", r.N, len(r.TokenNs), "token_ns must hold one timestamp per token")
		}
		for j, tok := range r.TokenIDs {
			if slices.Contains(eos, tok) {
				fs.add(IDContractEOS, w.path, ptr("requests", i, "token_ids", j), eos, tok,
					"EOS id %d at token %d: EOS must be suppressed in measured requests", tok, j)
				break
			}
		}
		for j, tok := range r.TokenIDs {
			if tok < 0 || (vocab > 0 && tok >= vocab) {
				fs.add(IDContractTokenRange, w.path, ptr("requests", i, "token_ids", j), "0.."+itoa(vocab-1), tok,
					"token id outside the vocabulary")
				break
			}
		}
		checkTimestamps(w.path, i, r, fs)
	}
}

// checkTimestamps checks one request's per-token timestamps and the timings
// derived from them. The timings are compared exactly with the float64
// computations the format documents: ttft = float64(token_ns[0]) / 1e9,
// runtime = float64(token_ns[N-1]) / 1e9 and decode = float64(token_ns[N-1]
// - token_ns[0]) / 1e9 (integer difference first).
func checkTimestamps(file string, i int, r editions.Request, fs *findings) {
	ns := r.TokenNs
	if len(ns) == 0 {
		return
	}
	for j := range ns {
		if ns[j] < 0 || (j > 0 && ns[j] < ns[j-1]) {
			lo := int64(0)
			if j > 0 {
				lo = ns[j-1]
			}
			fs.add(IDContractTimestamps, file, ptr("requests", i, "token_ns", j), ">= "+strconv.FormatInt(lo, 10), ns[j],
				"token timestamps must be non-negative and non-decreasing (token %d)", j)
			break
		}
	}
	first, last := ns[0], ns[len(ns)-1]
	if want := float64(first) / 1e9; r.TTFTSeconds != want {
		fs.add(IDContractTTFT, file, ptr("requests", i, "ttft_seconds"), want, r.TTFTSeconds,
			"ttft_seconds must be token_ns[0] / 1e9 = %d ns", first)
	}
	if want := float64(last) / 1e9; r.RuntimeSeconds != want {
		fs.add(IDContractRuntime, file, ptr("requests", i, "runtime_seconds"), want, r.RuntimeSeconds,
			"runtime_seconds must be token_ns[N-1] / 1e9 = %d ns", last)
	}
	if want := float64(last-first) / 1e9; r.DecodeSeconds != want {
		fs.add(IDContractDecode, file, ptr("requests", i, "decode_seconds"), want, r.DecodeSeconds,
			"decode_seconds must be (token_ns[N-1] - token_ns[0]) / 1e9 = %d ns", last-first)
	}
	if p := r.PrefillSeconds; p != nil && p.Ok() && (p.Value <= 0 || p.Value > r.TTFTSeconds) {
		fs.add(IDContractPrefill, file, ptr("requests", i, "prefill_seconds"), "in (0, "+strconv.FormatFloat(r.TTFTSeconds, 'g', -1, 64)+"]", p.Value,
			"prefill ends at the prompt's last logits, before the first token is selected and read back: it cannot exceed ttft_seconds")
	}
}

// checkObservations holds a worker's record to the contract's observation
// requirements for its device: "required" is a number, "may_be_unknown" a
// number or UNKNOWN, "unsupported" the string UNSUPPORTED. "required_zero"
// is check 6's business (invariants).
func checkObservations(w *worker, t *contractTerms, fs *findings) {
	device := w.rec.Environment.Device
	for _, o := range t.Observations {
		req := o.byDevice[device]
		if req == reqRequiredZero || req == reqUnknown || o.scope == "none" {
			continue
		}
		forEachObserved(w, o, func(p string, x any, err error) {
			if err != nil {
				fs.add(IDContractObservation, w.path, p, req, nil, "observation %s: %v", o.name, err)
				return
			}
			_, isNum := x.(json.Number)
			s, _ := x.(string)
			var want string
			switch req {
			case reqRequired:
				if !isNum {
					want = "a number"
				}
			case reqMayBeUnknown:
				if !isNum && s != editions.Unknown {
					want = "a number or UNKNOWN"
				}
			case reqUnsupported:
				if s != editions.Unsupported {
					want = "UNSUPPORTED"
				}
			default:
				fs.add(IDContractTerms, editions.ContractFile, ptr("contract", "observations", o.index, device), "a known requirement", req,
					"observation %s: unknown requirement %q", o.name, req)
				return
			}
			if want != "" {
				fs.add(IDContractObservation, w.path, p, want, x,
					"observation %s is %s on %s: the record must hold %s", o.name, req, device, want)
			}
		})
	}
}

// forEachObserved calls f with the value of observation o in each place the
// worker's record holds it: once for a worker observation, once per measured
// request for a request observation. p is the pointer into the record.
func forEachObserved(w *worker, o observation, f func(p string, x any, err error)) {
	switch o.scope {
	case "worker":
		x, err := resolve(w.doc.tree, o.field)
		f(o.field, x, err)
	case "request":
		reqs, _ := resolve(w.doc.tree, "/requests")
		arr, _ := reqs.([]any)
		for i, q := range arr {
			x, err := resolve(q, o.field)
			f(ptr("requests", i)+o.field, x, err)
		}
	}
}
