package verifier

import (
	"fmt"
	"reflect"

	"github.com/horizon-runmap/horizon/editions"
)

// Check 4: every aggregate of configs/<id>.json is recomputed from the raw
// records of that configuration and compared exactly. The descriptive fields
// (model, checkpoint, artifact, capacity, executor...) must be those of its
// workers.
func checkRecompute(v *view, fs *findings) {
	for _, c := range v.configs {
		if c.doc == nil || len(c.workers) == 0 {
			continue // a missing document or record is reported by checks 2 and 3
		}
		if len(c.workers) != len(c.rawPaths) {
			fs.add(IDRecomputeSkipped, c.path, "", len(c.rawPaths), len(c.workers),
				"%d of %d raw records of %s do not decode (see schema findings); its aggregates were not recomputed", len(c.rawPaths)-len(c.workers), len(c.rawPaths), c.id)
			continue
		}
		d := c.doc
		f := c.path
		m := computeMetrics(c.workers)

		if d.Requests != m.requests {
			fs.add(IDRecomputeRequests, f, "/requests", m.requests, d.Requests, "measured requests in the raw records")
		}
		if d.Blocks != m.blocks {
			fs.add(IDRecomputeRequests, f, "/blocks", m.blocks, d.Blocks, "raw records (workers) of the configuration")
		}
		mx := d.Metrics
		intEq := func(id, p string, want, got int64, what string) {
			if want != got {
				fs.add(id, f, "/metrics/"+p, want, got, "%s recomputed from raw", what)
			}
		}
		floatEq := func(id, p string, want, got float64, what string) {
			if want != got { // exact: same formula, same order, float64
				fs.add(id, f, "/metrics/"+p, num(want), got, "%s recomputed from raw (exact comparison, sums in block then prompt order)", what)
			}
		}
		intEq(IDRecomputeDecodeTokens, "decode_tokens", m.decodeTokens, mx.DecodeTokens, "sum(N-1)")
		floatEq(IDRecomputeDecodeSeconds, "decode_seconds", m.decodeSeconds, mx.DecodeSeconds, "sum(decode_seconds)")
		intEq(IDRecomputeOutputTokens, "output_tokens", m.outputTokens, mx.OutputTokens, "sum(N)")
		floatEq(IDRecomputeRuntime, "runtime_seconds", m.runtimeSeconds, mx.RuntimeSeconds, "sum(runtime_seconds)")
		obsFloatEq(fs, IDRecomputePooledDecode, f, "/metrics/pooled_decode_tok_s", m.pooledDecode, mx.PooledDecodeTokS, "pooled decode = sum(N-1)/sum(decode_seconds), UNKNOWN when sum(N-1) is 0")
		floatEq(IDRecomputeOverallOutput, "overall_output_tok_s", m.overallOutput, mx.OverallOutputTokS, "overall output = sum(N)/sum(runtime_seconds)")
		floatEq(IDRecomputeTTFTMean, "ttft_mean_s", m.ttftMean, mx.TTFTMeanS, "TTFT mean")
		floatEq(IDRecomputeResponseMean, "response_mean_s", m.responseMean, mx.ResponseMeanS, "response mean = mean(runtime_seconds)")
		obsFloatEq(fs, IDRecomputeSpread, f, "/metrics/block_spread_decode_tok_s/min", m.spreadMin, mx.BlockSpread.Min, "min of per-block pooled decode")
		obsFloatEq(fs, IDRecomputeSpread, f, "/metrics/block_spread_decode_tok_s/max", m.spreadMax, mx.BlockSpread.Max, "max of per-block pooled decode")
		intEq(IDRecomputeH2D, "h2d_bytes", m.h2dBytes, mx.H2DBytes, "H2D bytes summed over measured requests")
		intEq(IDRecomputeHitsMisses, "hits", m.hits, mx.Hits, "cache hits summed over measured requests")
		intEq(IDRecomputeHitsMisses, "misses", m.misses, mx.Misses, "cache misses summed over measured requests")

		obsEq(fs, IDRecomputeVRAM, f, "/metrics/vram_peak_bytes", m.vramPeak, mx.VRAMPeakBytes, "device VRAM peak, max over workers")
		obsEq(fs, IDRecomputeVRAM, f, "/metrics/vram_process_peak_bytes", m.vramProcessPeak, mx.VRAMProcessPeakBytes, "process VRAM peak, max over workers")
		obsEq(fs, IDRecomputeRSS, f, "/metrics/rss_peak_bytes", m.rssPeak, mx.RSSPeakBytes, "RSS peak, max over workers")
		for _, name := range invariantCounters {
			obsEq(fs, IDRecomputeInvariantSum, f, "/invariants/"+name, m.invariants[name], configInvariant(d.Invariants, name),
				name+" summed over measured requests")
		}

		checkPrefill(fs, f, m, mx.Prefill)
		checkPrefillLengths(v, c, fs)
		checkDecodeDepths(v, c, fs)
		checkConfigFields(c, fs)
		checkUncertainty(c, fs)
		for _, w := range c.workers {
			checkLayerMisses(w, fs)
			for _, msg := range timelineProblems(w.rec.Observations) {
				fs.add(IDRecomputeVRAMTimeline, w.path, "/observations/vram_timeline", nil, nil, "%s", msg)
			}
		}
	}
}

// checkPrefill compares the prefill aggregate with its recomputation: both
// absent (records made before prefill_seconds), or equal exactly.
func checkPrefill(fs *findings, f string, m metrics, got *editions.Prefill) {
	want := m.prefill
	switch {
	case m.prefillMixed:
		fs.add(IDRecomputePrefill, f, "/metrics/prefill", "prefill_seconds in every request or in none", "in some",
			"some of the configuration's raw requests carry prefill_seconds and some do not: one build writes it in all or none")
	case want == nil && got != nil:
		fs.add(IDRecomputePrefill, f, "/metrics/prefill", "absent", "present", "no raw request carries prefill_seconds")
	case want != nil && got == nil:
		fs.add(IDRecomputePrefill, f, "/metrics/prefill", "present", "absent", "the raw requests carry prefill_seconds")
	case want != nil && *want != *got:
		fs.add(IDRecomputePrefill, f, "/metrics/prefill", want, got,
			"sum(prompt_tokens), sum(prefill_seconds) and their ratio recomputed from raw (exact, request order)")
	}
}

// obsFloatEq compares a recomputed float observation with the written one,
// exactly; a number written where the recomputation has none (a 0 for an
// undefined rate among them) is an error here.
func obsFloatEq(fs *findings, id, file, p string, want, got editions.Obs[float64], what string) {
	if want.Status == got.Status && (!want.Ok() || want.Value == got.Value) {
		return
	}
	w, g := any(want.Status), any(got.Status)
	if want.Ok() {
		w = num(want.Value)
	}
	if got.Ok() {
		g = got.Value
	}
	fs.add(id, file, p, w, g, "%s recomputed from raw (exact comparison, sums in block then prompt order)", what)
}

// obsEq compares a recomputed observation with the written one. A 0 written
// for an UNKNOWN/UNSUPPORTED observation is left to check 6, which reports
// it as invariants.zero-for-unknown.
func obsEq(fs *findings, id, file, p string, want, got editions.Obs[int64], what string) {
	if want == got {
		return
	}
	if !want.Ok() && got.Ok() && got.Value == 0 {
		return
	}
	fs.add(id, file, p, obsValue(want), obsValue(got), "%s recomputed from raw", what)
}

// checkConfigFields compares a configuration's descriptive fields with its
// first worker's (check 3 already holds every worker to the first).
func checkConfigFields(c *configView, fs *findings) {
	d, r := c.doc, c.workers[0].rec
	src := c.workers[0].path
	for _, x := range []struct {
		ptr      string
		got, raw any
	}{
		{"/id", d.ID, c.id},
		{"/device", d.Device, r.Environment.Device},
		{"/model", d.Model, r.Setup.Model},
		{"/checkpoint", d.Checkpoint, r.Checkpoint},
		{"/artifact", d.Artifact, r.Artifact},
		{"/expert_format", d.ExpertFormat, r.Artifact.ExpertFormat},
		{"/capacity", d.Capacity, r.Setup.Capacity},
		{"/experts_per_layer", d.ExpertsPerLayer, r.Setup.Model.ExpertsPerLayer},
		{"/executor", d.Executor, r.Setup.Executor},
		{"/placement", d.Placement, r.Setup.Placement},
		{"/policy", d.Policy, r.Setup.Policy},
		{"/regime", d.Regime, r.Setup.Regime},
	} {
		if !reflect.DeepEqual(x.got, x.raw) {
			fs.add(IDRecomputeConfigField, c.path, x.ptr, x.raw, x.got, "differs from the raw record %s", src)
		}
	}
}

// checkLayerMisses checks that a request's misses are the sum of its
// per-layer misses, one entry per routed layer.
func checkLayerMisses(w *worker, fs *findings) {
	layers := w.rec.Setup.Model.Layers
	for i, r := range w.rec.Requests {
		lm := r.Cache.LayerMisses
		if len(lm) != layers {
			fs.add(IDRecomputeLayerMisses, w.path, ptr("requests", i, "cache", "layer_misses"), layers, len(lm),
				"layer_misses holds one count per routed layer")
			continue
		}
		var sum int64
		for _, x := range lm {
			sum += x
		}
		if sum != r.Cache.Misses {
			fs.add(IDRecomputeLayerMisses, w.path, ptr("requests", i, "cache", "misses"), sum, r.Cache.Misses,
				"misses must be the sum of layer_misses")
		}
	}
}

// timelineProblems checks a worker's VRAM timeline against its peaks: the
// device peak is the largest device reading, the process peak the largest
// observed process reading (UNKNOWN when none was), and time never goes
// backwards. No timeline: nothing to check (older records).
func timelineProblems(o editions.WorkerObservations) []string {
	tl := o.VRAMTimeline
	if len(tl) == 0 {
		return nil
	}
	var out []string
	if !o.VRAMPeakBytes.Ok() {
		return []string{"a VRAM timeline is recorded but the device peak is " + o.VRAMPeakBytes.Status}
	}
	dev, proc := int64(-1), int64(-1)
	for i, s := range tl {
		if i > 0 && s.AtNs < tl[i-1].AtNs {
			out = append(out, fmt.Sprintf("sample %d at %d ns comes before sample %d at %d ns", i, s.AtNs, i-1, tl[i-1].AtNs))
		}
		dev = max(dev, s.DeviceUsedBytes)
		if s.ProcessUsedBytes.Ok() {
			proc = max(proc, s.ProcessUsedBytes.Value)
		}
	}
	if dev != o.VRAMPeakBytes.Value {
		out = append(out, fmt.Sprintf("device peak %d, the timeline's largest reading %d", o.VRAMPeakBytes.Value, dev))
	}
	switch {
	case proc < 0 && o.VRAMProcessPeakBytes.Ok():
		out = append(out, fmt.Sprintf("process peak %d, but no reading of the timeline observed the process", o.VRAMProcessPeakBytes.Value))
	case proc >= 0 && (!o.VRAMProcessPeakBytes.Ok() || o.VRAMProcessPeakBytes.Value != proc):
		peak := o.VRAMProcessPeakBytes.Status
		if o.VRAMProcessPeakBytes.Ok() {
			peak = fmt.Sprint(o.VRAMProcessPeakBytes.Value)
		}
		out = append(out, fmt.Sprintf("process peak %s, the timeline's largest process reading %d", peak, proc))
	}
	return out
}
