package verifier

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/campaigns/report"
	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
)

// reaggregate rewrites each configuration document's aggregates from the
// raw records present (creating the document from the first raw record when
// it does not exist yet), then every claim from its sources (and its
// statement from its configuration document), then the
// reports' tables and claim count (rerenderReports). It is the fixture's
// own writer: the formulas of DESIGN section 8, written again.
func reaggregate(t testing.TB, dir string) {
	t.Helper()
	for _, id := range configIDs(t, dir) {
		paths := rawPathsOf(t, dir, id)
		if len(paths) == 0 {
			continue
		}
		var raws []*editions.RawRecord
		for _, p := range paths {
			b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
			if err != nil {
				t.Fatal(err)
			}
			r, err := LoadRaw(b)
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			raws = append(raws, r)
		}
		agg := fixAggregate(id, raws, paths)
		// Per prompt length, under a contract that declares lengths: the
		// runner's own aggregation, on purpose (as for the bootstrap).
		if k := frozenContract(t, dir); k != nil && k.PromptRule != nil {
			pl, err := report.PrefillLengths(id, report.DefaultBootstrapSeed, k, raws)
			if err != nil {
				// The records no longer run the declared lengths (a
				// forged prompt): the runner would refuse them; the
				// forger keeps the entries the document holds.
				if b, rerr := os.ReadFile(filepath.Join(dir, filepath.FromSlash(editions.ConfigPath(id)))); rerr == nil {
					if old, lerr := LoadConfig(b); lerr == nil {
						pl = old.Metrics.PrefillLengths
					}
				}
			}
			agg.Metrics.PrefillLengths = pl
			if k.DecodeByPrompt() {
				dd, err := report.DecodeDepths(id, report.DefaultBootstrapSeed, k, raws)
				if err != nil {
					// As above: the forger keeps the document's entries.
					if b, rerr := os.ReadFile(filepath.Join(dir, filepath.FromSlash(editions.ConfigPath(id)))); rerr == nil {
						if old, lerr := LoadConfig(b); lerr == nil {
							dd = old.Metrics.DecodeDepths
						}
					}
				}
				agg.Metrics.DecodeDepths = dd
			}
		}
		cp := editions.ConfigPath(id)
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(cp))); err != nil {
			writeDoc(t, dir, cp, agg)
			continue
		}
		// Keep whatever else the document holds; replace what is derived.
		edit(t, dir, cp, func(doc map[string]any) {
			fresh := toTree(t, agg).(map[string]any)
			for _, k := range []string{"metrics", "invariants", "requests", "blocks", "workers"} {
				doc[k] = fresh[k]
			}
			if u, ok := fresh["uncertainty"]; ok {
				doc["uncertainty"] = u
			} else {
				delete(doc, "uncertainty")
			}
		})
	}
	refreshClaims(t, dir)
}

// refreshClaims rewrites the claims from the configuration documents as
// they are (statements, values, ratio and interval references), or writes
// them where there are none, then the reports' tables.
func refreshClaims(t testing.TB, dir string) {
	t.Helper()
	defer rerenderReports(t, dir)
	if _, err := os.Stat(filepath.Join(dir, editions.ClaimsFile)); err != nil {
		writeDoc(t, dir, editions.ClaimsFile, fixClaims(t, dir))
		return
	}
	// A careful forger also rewrites each statement from its (possibly
	// edited) configuration document, as the runner would.
	statements := map[string]string{}
	for _, c := range fixClaims(t, dir).Claims {
		statements[c.ID] = c.Statement
	}
	edit(t, dir, editions.ClaimsFile, func(doc map[string]any) {
		claims, _ := doc["claims"].([]any)
		// Claims about what the forgery removed (a dropped depth's entry)
		// go, as the runner would not have made them.
		kept := claims[:0]
		for _, c := range claims {
			if sourceResolves(t, dir, obj(t, c, "source")) {
				kept = append(kept, c)
			}
		}
		claims = kept
		doc["claims"] = claims
		for _, c := range claims {
			c := c.(map[string]any)
			if s, ok := statements[c["id"].(string)]; ok {
				c["statement"] = s
			}
			src := obj(t, c, "source")
			v := sourceValue(t, dir, src)
			src["value"] = v
			dec := numInt(t, c["decimals"])
			c["value"] = fixRound(v, int(dec))
			for _, k := range []string{"numerator", "denominator"} {
				if ref, ok := c[k].(map[string]any); ok {
					ref["value"] = sourceValue(t, dir, ref)
				}
			}
			if iv, ok := c["interval"].(map[string]any); ok {
				for _, k := range []string{"lo", "hi"} {
					ref := obj(t, iv, k)
					ref["value"] = sourceValue(t, dir, ref)
				}
			}
		}
	})
}

// sourceResolves reports whether ref's pointer names a value in its file.
func sourceResolves(t testing.TB, dir string, ref map[string]any) bool {
	t.Helper()
	_, err := resolve(readTree(t, dir, ref["file"].(string)), ref["pointer"].(string))
	return err == nil
}

func sourceValue(t testing.TB, dir string, ref map[string]any) float64 {
	t.Helper()
	tree := readTree(t, dir, ref["file"].(string))
	x, err := resolve(tree, ref["pointer"].(string))
	if err != nil {
		t.Fatal(err)
	}
	n, ok := x.(json.Number)
	if !ok {
		return 0
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// fixRound rounds half away from zero through the shortest decimal digits,
// with big-number-free arithmetic of its own.
func fixRound(x float64, d int) float64 {
	s := strconv.FormatFloat(math.Abs(x), 'f', -1, 64)
	ip, fp, _ := strings.Cut(s, ".")
	if len(fp) <= d {
		return x
	}
	n, _ := strconv.ParseUint(ip+fp[:d], 10, 64)
	if fp[d] >= '5' {
		n++
	}
	r, _ := strconv.ParseFloat(strconv.FormatUint(n, 10)+"e-"+strconv.Itoa(d), 64)
	return math.Copysign(r, x)
}

func fixAggregate(id string, raws []*editions.RawRecord, paths []string) *editions.ConfigDoc {
	r0 := raws[0]
	d := &editions.ConfigDoc{
		Schema: editions.SchemaConfig, Version: editions.Version, ID: id,
		Device: r0.Environment.Device, Model: r0.Setup.Model, Checkpoint: r0.Checkpoint, Artifact: r0.Artifact,
		ExpertFormat: r0.Artifact.ExpertFormat, Capacity: r0.Setup.Capacity, ExpertsPerLayer: r0.Setup.Model.ExpertsPerLayer,
		Executor: r0.Setup.Executor, Placement: r0.Setup.Placement, Policy: r0.Setup.Policy, Regime: r0.Setup.Regime,
		Blocks: len(raws), Workers: paths,
	}
	mx := &d.Metrics
	var ttft float64
	var pfTokens int64
	var pfSeconds float64
	var pfField, pfTimed int
	var spread []float64
	obsMax := func(get func(*editions.RawRecord) editions.Obs[int64]) editions.Obs[int64] {
		out := editions.Observed[int64](math.MinInt64)
		for _, r := range raws {
			o := get(r)
			switch {
			case o.Status == editions.Unknown || out.Status == editions.Unknown:
				out = editions.UnknownObs[int64]()
			case o.Status == editions.Unsupported || out.Status == editions.Unsupported:
				out = editions.UnsupportedObs[int64]()
			case o.Value > out.Value:
				out = o
			}
		}
		return out
	}
	inv := map[string]editions.Obs[int64]{}
	for _, r := range raws {
		var bt int64
		var bs float64
		for _, q := range r.Requests {
			d.Requests++
			mx.DecodeTokens += int64(q.N - 1)
			mx.DecodeSeconds += q.DecodeSeconds
			mx.OutputTokens += int64(q.N)
			mx.RuntimeSeconds += q.RuntimeSeconds
			ttft += q.TTFTSeconds
			pfTokens += int64(q.PromptTokens)
			if q.PrefillSeconds != nil {
				pfField++
				if q.PrefillSeconds.Ok() {
					pfTimed++
					pfSeconds += q.PrefillSeconds.Value
				}
			}
			mx.H2DBytes += q.Cache.H2DBytes
			mx.Hits += q.Cache.Hits
			mx.Misses += q.Cache.Misses
			bt += int64(q.N - 1)
			bs += q.DecodeSeconds
			for name, o := range map[string]editions.Obs[int64]{
				"d2h": q.Cache.D2HExpertBytes, "wb": q.Cache.Writebacks, "aw": q.Cache.AuthorityWrites,
				"hash": q.Cache.RequestHashBytes, "reads": q.Cache.RequestArtifactReads,
			} {
				cur, seen := inv[name]
				switch {
				case !seen:
					inv[name] = o
				case cur.Status == editions.Unknown || o.Status == editions.Unknown:
					inv[name] = editions.UnknownObs[int64]()
				case cur.Status != "" || o.Status != "":
					inv[name] = editions.UnsupportedObs[int64]()
				default:
					inv[name] = editions.Observed(cur.Value + o.Value)
				}
			}
		}
		if bt > 0 {
			spread = append(spread, float64(bt)/bs)
		}
	}
	mx.PooledDecodeTokS = editions.UnknownObs[float64]()
	if mx.DecodeTokens > 0 { // one output token per request: no decode rate
		mx.PooledDecodeTokS = editions.Observed(float64(mx.DecodeTokens) / mx.DecodeSeconds)
	}
	mx.OverallOutputTokS = float64(mx.OutputTokens) / mx.RuntimeSeconds
	mx.TTFTMeanS = ttft / float64(d.Requests)
	if pfField > 0 {
		mx.Prefill = &editions.Prefill{PromptTokens: pfTokens, Seconds: editions.UnknownObs[float64](), TokS: editions.UnknownObs[float64]()}
		if pfTimed == d.Requests && pfSeconds > 0 {
			mx.Prefill.Seconds, mx.Prefill.TokS = editions.Observed(pfSeconds), editions.Observed(float64(pfTokens)/pfSeconds)
		}
	}
	mx.ResponseMeanS = mx.RuntimeSeconds / float64(d.Requests)
	mx.VRAMPeakBytes = obsMax(func(r *editions.RawRecord) editions.Obs[int64] { return r.Observations.VRAMPeakBytes })
	mx.VRAMProcessPeakBytes = obsMax(func(r *editions.RawRecord) editions.Obs[int64] { return r.Observations.VRAMProcessPeakBytes })
	mx.RSSPeakBytes = obsMax(func(r *editions.RawRecord) editions.Obs[int64] { return r.Observations.RSSPeakBytes })
	sort.Float64s(spread)
	mx.BlockSpread = editions.Spread{Min: editions.UnknownObs[float64](), Max: editions.UnknownObs[float64]()}
	if len(spread) > 0 {
		mx.BlockSpread = editions.Spread{Min: editions.Observed(spread[0]), Max: editions.Observed(spread[len(spread)-1])}
	}
	d.Invariants = editions.Invariants{D2HExpertBytes: inv["d2h"], Writebacks: inv["wb"], AuthorityWrites: inv["aw"],
		RequestHashBytes: inv["hash"], RequestArtifactReads: inv["reads"]}
	// The runner's own bootstrap, on purpose (as fixClaims uses the
	// runner's claims): the verifier recomputes it with code of its own.
	d.Uncertainty = report.Uncertainty(id, report.DefaultBootstrapSeed, raws)
	return d
}

// frozenContract is the edition's frozen contract, nil where it does not
// decode (a forgery of the contract itself).
func frozenContract(t testing.TB, dir string) *contracts.Contract {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, editions.ContractFile))
	if err != nil {
		return nil
	}
	var kd editions.ContractDoc
	if json.Unmarshal(b, &kd) != nil {
		return nil
	}
	k, err := contracts.FromJSON(kd.Contract)
	if err != nil {
		return nil
	}
	return k
}

// fixClaims writes the claims the runner writes (report.Claims: pooled
// decode, overall output, TTFT mean, H2D bytes, and the RSS and VRAM peaks
// where observed) from the configuration documents on disk. The runner's
// own function is used on purpose: the verifier regenerates the claims'
// statements with code of its own, and the fixture proves the two agree.
func fixClaims(t testing.TB, dir string) *editions.ClaimsDoc {
	t.Helper()
	var docs []editions.ConfigDoc
	for _, id := range configIDs(t, dir) {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(editions.ConfigPath(id))))
		if err != nil {
			continue // a configuration without a document claims nothing
		}
		d, err := LoadConfig(b)
		if err != nil {
			continue
		}
		docs = append(docs, *d)
	}
	c := report.Claims(&report.Campaign{Edition: fixEdition, Evidence: "E1", Publication: "internal"}, docs)
	return &c
}
