package verifier

import (
	"encoding/json"
	"strconv"

	"github.com/horizon-runmap/horizon/editions"
)

// invariantIDs maps each required-zero counter of the cache contract to its
// finding; another required-zero observation reports invariants.required-zero.
var invariantIDs = map[string]string{
	"d2h_expert_bytes":       IDInvD2H,
	"writebacks":             IDInvWritebacks,
	"authority_writes":       IDInvAuthority,
	"request_hash_bytes":     IDInvHash,
	"request_artifact_reads": IDInvArtifactReads,
}

// IDInvRequiredZeroUnobserved replaces invariants.unknown (a hint, now
// retired and never reported): "required_zero" means an observed zero, so a
// build that did not observe the counter has not met the contract.
var IDInvRequiredZeroUnobserved = def("invariants", "invariants.required-zero-unobserved", Error,
	"a required-zero observation is UNKNOWN, UNSUPPORTED or absent: the contract requires an observed zero, and an unobserved counter is no zero")

// Check 6: every observation the contract requires to be zero on the
// worker's device ("required_zero") is an observed 0. A counter that did
// not exist (UNKNOWN or UNSUPPORTED) or is absent fails the invariant, an
// error (invariants.required-zero-unobserved): the contract requires the
// zero to be observed, so an unverified invariant is not met. (Until this
// change it was the hint invariants.unknown, which is retired: its ID stays
// in the catalogue with that meaning and is never reported.) Writing 0 in a configuration for an
// observation its raw records do not have is an error. (Claims that do so are
// caught in check 5 with the same finding ID.)
//
// Without a readable contract, the five counters of DESIGN section 5.7 are
// taken as required zero on every device.
func checkInvariants(v *view, fs *findings) {
	obs := requiredZero(v.terms)
	for _, c := range v.configs {
		for _, o := range obs {
			unobserved, total, status := 0, 0, ""
			var where *worker
			for _, w := range c.workers {
				if o.byDevice[w.rec.Environment.Device] != reqRequiredZero {
					continue
				}
				forEachObserved(w, o, func(p string, x any, err error) {
					total++
					switch val := x.(type) {
					case json.Number:
						if f, perr := strconv.ParseFloat(string(val), 64); perr != nil || f != 0 {
							id := invariantIDs[o.name]
							if id == "" {
								id = IDInvOther
							}
							fs.add(id, w.path, p, 0, val, "%s must be 0 (the contract requires an observed zero on %s)", o.name, w.rec.Environment.Device)
						}
						return
					case string:
						if val == editions.Unknown || val == editions.Unsupported {
							unobserved++
							status = val
							if where == nil {
								where = w
							}
							return
						}
					}
					if err != nil {
						x = "absent"
					}
					unobserved++
					status = "absent"
					if where == nil {
						where = w
					}
					fs.add(IDContractObservation, w.path, p, "a number (required zero)", x, "observation %s is not recorded", o.name)
				})
			}
			if unobserved > 0 {
				fs.add(IDInvRequiredZeroUnobserved, where.path, "", 0, status,
					"configuration %s: %s is %s in %d of %d places: the contract requires an observed zero, and an unobserved counter is no zero",
					c.id, o.name, status, unobserved, total)
			}
		}
		checkZeroForUnknown(c, fs)
	}
}

// requiredZero returns the contract's required-zero observations (on any
// device), or the cache contract's five counters when there is no contract.
func requiredZero(t *contractTerms) []observation {
	var out []observation
	if t != nil && t.Observations != nil {
		for _, o := range t.Observations {
			if o.scope == "none" {
				continue
			}
			for _, r := range o.byDevice {
				if r == reqRequiredZero {
					out = append(out, o)
					break
				}
			}
		}
		return out
	}
	for _, name := range invariantCounters {
		out = append(out, observation{name: name, scope: "request", field: "/cache/" + name,
			byDevice: map[string]string{"cpu": reqRequiredZero, "cuda": reqRequiredZero}})
	}
	return out
}

// checkZeroForUnknown finds a configuration that writes 0 where its raw
// records hold no observation.
func checkZeroForUnknown(c *configView, fs *findings) {
	if c.doc == nil || len(c.workers) == 0 {
		return
	}
	m := computeMetrics(c.workers)
	d := c.doc
	type pair struct {
		ptr      string
		raw, got editions.Obs[int64]
	}
	pairs := []pair{
		{"/metrics/vram_peak_bytes", m.vramPeak, d.Metrics.VRAMPeakBytes},
		{"/metrics/vram_process_peak_bytes", m.vramProcessPeak, d.Metrics.VRAMProcessPeakBytes},
		{"/metrics/rss_peak_bytes", m.rssPeak, d.Metrics.RSSPeakBytes},
	}
	for _, name := range invariantCounters {
		pairs = append(pairs, pair{"/invariants/" + name, m.invariants[name], configInvariant(d.Invariants, name)})
	}
	for _, p := range pairs {
		if !p.raw.Ok() && p.got.Ok() && p.got.Value == 0 {
			fs.add(IDInvZeroForUnknown, c.path, p.ptr, p.raw.Status, 0,
				"0 is written where the raw records say %s: an absent observation is never 0", p.raw.Status)
		}
	}
	// Rates with no interval to measure (one output token per request: no
	// decode), and prefill rates of untimed requests.
	rates := []struct {
		ptr      string
		raw, got editions.Obs[float64]
	}{
		{"/metrics/pooled_decode_tok_s", m.pooledDecode, d.Metrics.PooledDecodeTokS},
		{"/metrics/block_spread_decode_tok_s/min", m.spreadMin, d.Metrics.BlockSpread.Min},
		{"/metrics/block_spread_decode_tok_s/max", m.spreadMax, d.Metrics.BlockSpread.Max},
	}
	for _, p := range rates {
		if !p.raw.Ok() && p.got.Ok() && p.got.Value == 0 {
			fs.add(IDInvZeroForUnknown, c.path, p.ptr, p.raw.Status, 0,
				"0 is written where the raw records give no value (%s: no decode interval): an absent observation is never 0", p.raw.Status)
		}
	}
}
