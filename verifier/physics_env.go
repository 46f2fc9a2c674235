package verifier

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/horizon-runmap/horizon/editions"
)

// One run, one build; hosts as the campaign declares. An edition is one
// campaign run by one build: every worker process is the same binary
// (environment.build, which is also the manifest's tool block, written by
// the same run). Its workers may run on several hosts of a cluster (run
// --scheduler slurm); the frozen campaign's hosts declaration
// (/campaign/hosts) says how far they may differ:
//
//	uniform (or absent)  every worker on one GPU model and driver (on the
//	                     cpu device, where both are UNSUPPORTED: one CPU
//	                     model); hostnames may differ
//	mixed                each configuration's workers on one host
//	                     (hostname, GPU and driver); configurations on
//	                     different ones, so speeds compare within a
//	                     configuration only
//
// A worker that differs from the majority of its group (the edition, or
// its configuration) is the finding. And each worker ran what the frozen
// campaign declares for its configuration. The campaign is read generically
// (campaign.json, /campaign/configurations/<i>):
//
//	checkpoint/synthetic/{arch,seed}   raw checkpoint kind "synthetic", arch, seed
//	checkpoint/hf/{dir,revision}       raw checkpoint kind "hf", dir, revision
//	expert_format                      "int4" -> qpack-int4-b256-v1, "fp16" -> fp16
//	capacity                           compared as a number where check contract
//	                                   could not read it as an integer
//	transport, prefetch, overlap       raw setup; absent on either side means the
//	                                   documented default (staged, off, off)
//	step_mode                          only where the campaign declares it (today's
//	                                   campaigns do not; absent in raw means ops)
//	prefill                            only where the raw record states it (absent in
//	                                   the campaign means auto: batched on the cpu
//	                                   without prefetch, else token)
//
// Executor and an integer capacity are check contract's
// (contract.campaign-config); spares and staging are not compared (the
// campaign's 0 means "top-k", the record holds the resolved number).
//
// What this cannot catch: a forger who rewrites every worker's build, or the
// campaign together with every record, stays consistent; the frozen campaign
// is bound to a campaign file only by check binding (Options.CampaignFile).

var (
	IDPhysBuild = def("physics", "physics.build", Error,
		"a worker's environment.build (version, vcs_revision, vcs_modified) differs from the manifest's tool block: one edition is one build")
	IDPhysHostsUniform = def("physics", "physics.hosts-uniform", Error,
		"under hosts: uniform (the default), a worker's GPU or driver (on the cpu device its CPU model) differs from the majority of the edition's workers")
	IDPhysHostsMixed = def("physics", "physics.hosts-mixed", Error,
		"under hosts: mixed, a worker's hostname, GPU or driver differs from the majority of its configuration's workers")
	IDPhysHostsDeclaration = def("physics", "physics.hosts-declaration", Error,
		"the frozen campaign's hosts is neither uniform nor mixed")
	IDPhysCampaignSetup = def("physics", "physics.campaign-setup", Error,
		"a worker's checkpoint, expert format, capacity, transport, prefetch, overlap, step mode or prefill differs from what the campaign declares for its configuration")
)

// expertFormats maps a campaign's expert_format to the artifact's.
var campaignExpertFormats = map[string]string{"int4": "qpack-int4-b256-v1", "fp16": "fp16"}

func checkEnvironment(v *view, ws []physWorker, fs *findings) {
	tool := v.e.Manifest.Tool
	for _, pw := range ws {
		w := pw.w
		b := w.rec.Environment.Build
		var diff []string
		for _, x := range [][3]string{
			{"version", tool.Version, b.Version},
			{"vcs_revision", tool.VCSRevision, b.VCSRevision},
			{"vcs_modified", tool.VCSModified, b.VCSModified},
		} {
			if x[1] != x[2] {
				diff = append(diff, fmt.Sprintf("%s %q (manifest %q)", x[0], x[2], x[1]))
			}
		}
		if len(diff) > 0 {
			fs.add(IDPhysBuild, w.path, "/environment/build",
				map[string]string{"version": tool.Version, "vcs_revision": tool.VCSRevision, "vcs_modified": tool.VCSModified},
				map[string]string{"version": b.Version, "vcs_revision": b.VCSRevision, "vcs_modified": b.VCSModified},
				"the worker was built otherwise than the edition's tool (%s): %s", editions.ManifestFile, strings.Join(diff, ", "))
		}
	}
	checkHosts(v, ws, fs)
	checkCampaignSetup(v, fs)
}

// checkHosts holds the workers to the campaign's hosts declaration.
func checkHosts(v *view, ws []physWorker, fs *findings) {
	decl := editions.Unknown
	if cd := v.e.docs[editions.CampaignFile]; cd != nil && cd.tree != nil {
		x, err := resolve(cd.tree, "/campaign/hosts")
		switch s, _ := x.(string); {
		case err != nil:
			decl = "uniform" // absent: the default, and every edition from before the field
		case s == "uniform" || s == "mixed":
			decl = s
		default:
			fs.add(IDPhysHostsDeclaration, editions.CampaignFile, "/campaign/hosts", "uniform or mixed", x,
				"the campaign declares hosts %v; the workers' hosts are not checked", x)
			return
		}
	} else {
		return // check contract reports the missing campaign
	}
	groups := map[string][]physWorker{} // by configuration under mixed; one group under uniform
	var order []string
	for _, pw := range ws {
		g := ""
		if decl == "mixed" {
			g = pw.w.rec.ConfigID
		}
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], pw)
	}
	for _, g := range order {
		group := groups[g]
		keys := make([]string, len(group))
		for i, pw := range group {
			keys[i] = hostKey(decl, pw.w)
		}
		ref := majorityIndex(keys)
		if ref < 0 {
			continue
		}
		for i, pw := range group {
			if keys[i] == keys[ref] {
				continue
			}
			e, f := group[ref].w.rec.Environment, pw.w.rec.Environment
			if decl == "mixed" {
				fs.add(IDPhysHostsMixed, pw.w.path, "/environment",
					map[string]string{"hostname": e.Hostname, "gpu": e.GPU, "driver": e.Driver},
					map[string]string{"hostname": f.Hostname, "gpu": f.GPU, "driver": f.Driver},
					"the campaign declares hosts: mixed, each configuration on one host, but this worker of %s ran on another host, GPU or driver than most of its configuration's (e.g. %s)", g, group[ref].w.path)
				continue
			}
			fs.add(IDPhysHostsUniform, pw.w.path, "/environment",
				map[string]string{"gpu": e.GPU, "driver": e.Driver, "cpu": e.CPU},
				map[string]string{"gpu": f.GPU, "driver": f.Driver, "cpu": f.CPU},
				"the campaign declares hosts: uniform (the default), one GPU model and driver (one CPU model on the cpu device), but this worker ran on another than most of the edition's workers (e.g. %s); a campaign whose configurations run on different machines declares hosts: mixed", group[ref].w.path)
		}
	}
}

// hostKey is what must agree between two workers under decl: hostname, GPU
// and driver under mixed; GPU and driver under uniform, and the CPU model
// on the cpu device (whose GPU and driver are UNSUPPORTED).
func hostKey(decl string, w *worker) string {
	e := w.rec.Environment
	key := strconv.Quote(e.GPU) + " " + strconv.Quote(e.Driver)
	switch {
	case decl == "mixed":
		key = strconv.Quote(e.Hostname) + " " + key
	case e.Device == "cpu":
		key += " " + strconv.Quote(e.CPU)
	}
	return key
}

// checkCampaignSetup holds each worker to its campaign configuration.
func checkCampaignSetup(v *view, fs *findings) {
	cd := v.e.docs[editions.CampaignFile]
	if cd == nil || cd.tree == nil {
		return // check contract reports the missing campaign
	}
	x, err := resolve(cd.tree, "/campaign/configurations")
	if err != nil {
		return
	}
	list, _ := x.([]any)
	for i, item := range list {
		m, _ := item.(map[string]any)
		id, _ := m["id"].(string)
		c := v.byID[id]
		if c == nil {
			continue // check contract reports it
		}
		base := ptr("campaign", "configurations", i)
		for _, w := range c.workers {
			for _, d := range campaignDiffs(m, w.rec) {
				fs.add(IDPhysCampaignSetup, w.path, d.ptr, d.want, d.got,
					"the campaign (%s#%s) declares %s %v for %s; the worker ran %v", editions.CampaignFile, base, d.what, d.want, id, d.got)
			}
		}
	}
}

type setupDiff struct {
	what, ptr string
	want, got any
}

// campaignDiffs compares one raw record with its campaign configuration m.
func campaignDiffs(m map[string]any, r *editions.RawRecord) []setupDiff {
	var out []setupDiff
	str := func(k string) (string, bool) { s, ok := m[k].(string); return s, ok }
	ck := r.Checkpoint
	if cp, ok := m["checkpoint"].(map[string]any); ok {
		if syn, ok := cp["synthetic"].(map[string]any); ok {
			arch, _ := syn["arch"].(string)
			seed := jsonNumberText(syn["seed"])
			got := ""
			if ck.Seed != nil {
				got = strconv.FormatInt(*ck.Seed, 10)
			}
			if ck.Kind != "synthetic" || ck.Arch != arch || got != seed {
				out = append(out, setupDiff{"checkpoint", "/checkpoint", map[string]any{"kind": "synthetic", "arch": arch, "seed": seed},
					map[string]any{"kind": ck.Kind, "arch": ck.Arch, "seed": got}})
			}
		} else if hf, ok := cp["hf"].(map[string]any); ok {
			dir, _ := hf["dir"].(string)
			rev, _ := hf["revision"].(string)
			if ck.Kind != "hf" || ck.Dir != dir || ck.Revision != rev {
				out = append(out, setupDiff{"checkpoint", "/checkpoint", map[string]any{"kind": "hf", "dir": dir, "revision": rev},
					map[string]any{"kind": ck.Kind, "dir": ck.Dir, "revision": ck.Revision}})
			}
		}
	}
	if f, ok := str("expert_format"); ok {
		if want, known := campaignExpertFormats[f]; !known || r.Artifact.ExpertFormat != want {
			if !known {
				want = "no known artifact format (campaign " + strconv.Quote(f) + ")"
			}
			out = append(out, setupDiff{"expert_format", "/artifact/expert_format", want, r.Artifact.ExpertFormat})
		}
	}
	if x, present := m["capacity"]; present {
		if _, isInt := asInt(x); !isInt { // an integer is check contract's
			n, isNum := x.(json.Number)
			f, err := strconv.ParseFloat(string(n), 64)
			if !isNum || err != nil || f != float64(r.Setup.Capacity) {
				out = append(out, setupDiff{"capacity", "/setup/capacity", x, r.Setup.Capacity})
			}
		}
	}
	s := r.Setup
	for _, x := range []struct {
		member, got, def string
		always           bool // absent in the campaign means the default
	}{
		{"transport", s.Transport, defaultTransport, true},
		{"prefetch", s.Prefetch, defaultPrefetch, true},
		{"overlap", s.Overlap, defaultOverlap, true},
		{"step_mode", s.StepMode, defaultStepMode, false},
	} {
		want, ok := str(x.member)
		if !ok && !x.always {
			continue
		}
		want = orDefault(want, x.def)
		if x.member == "step_mode" && want == "auto" {
			want = autoStepMode(r)
		}
		if got := orDefault(x.got, x.def); got != want {
			out = append(out, setupDiff{x.member, "/setup/" + x.member, want, got})
		}
	}
	// prefill: records from before the field omit it (they ran token at a
	// time, whatever the rule now says), so only a recorded mode is held
	// to the campaign's (absent: auto, resolved by the engine's rule).
	if s.Prefill != "" {
		want, _ := str("prefill")
		want = orDefault(want, "auto")
		if want == "auto" {
			want = autoPrefill(r)
		}
		if s.Prefill != want {
			out = append(out, setupDiff{"prefill", "/setup/prefill", want, s.Prefill})
		}
	}
	return out
}

// autoPrefill is the prefill a campaign's prefill auto resolves to
// (runtime/engine's rule, stated again here, as it stood for the record's
// raw version): batched with prefetch off (next-layer prefetch predicts per
// position) on the CPU, and on CUDA from editions.RawVersionBatchedAuto
// (backend.BatchedDefault); token at a time otherwise.
func autoPrefill(r *editions.RawRecord) string {
	if orDefault(r.Setup.Prefetch, defaultPrefetch) != defaultPrefetch {
		return "token"
	}
	if r.Environment.Device == "cpu" || r.Version >= editions.RawVersionBatchedAuto {
		return "batched"
	}
	return "token"
}

// jsonNumberText is the literal of a JSON number ("" for anything else).
func jsonNumberText(x any) string {
	n, _ := x.(json.Number)
	return string(n)
}

// autoStepMode is the step mode a campaign's step_mode auto resolves to
// (runtime/engine's rule, stated again here): op by op on the CPU and with
// next-layer prefetch; on CUDA graph-full at full residency, else
// graph-segmented.
func autoStepMode(r *editions.RawRecord) string {
	s := r.Setup
	switch {
	case r.Environment.Device != "cuda", orDefault(s.Prefetch, defaultPrefetch) != defaultPrefetch:
		return "ops"
	case s.Capacity == s.Model.ExpertsPerLayer:
		return "graph-full"
	}
	return "graph-segmented"
}
