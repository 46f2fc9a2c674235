package verifier

import (
	"strconv"

	"github.com/horizon-runmap/horizon/editions"
)

// Memory has a floor. On CUDA the experts a worker placed
// (preparation.h2d_bytes: capacity x layers records) stay resident on the
// device for the whole worker, and so does its KV cache, allocated when the
// engine loads: layers x 2 (K and V) x kv_heads x head_dim x positions x
// the element's bytes (4 for FP32, 2 for FP16: artifact.kv_dtype). The
// positions are the worker's rule (campaigns/worker: the most prompt +
// output tokens of any of its requests, capped at the model's context,
// runtime/engine) without the warmup, whose prompt ids the record does not
// keep: a lower bound. The KV shape is known for the synthetic presets
// (syntheticKV, held to runtime/model's by a test); an HF checkpoint's is
// not recorded, so there the floor is the experts alone. So the
// device-wide VRAM peak and the process's own peak are at least experts +
// KV; and the process's memory is
// part of the device's, so its peak never exceeds the device's. The
// sampler that measures the peaks also writes the VRAM timeline: in an
// edition whose CUDA workers carry timelines, a CUDA worker without one
// dropped it. On every device the host authority (a complete host-RAM
// copy of every expert record, preparation.authority_bytes, itself checked
// against experts x layers x record_bytes) is resident from preparation to
// the last request, so the worker's RSS peak is at least its size.
//
// What this cannot catch: peaks lowered but kept above the placement and
// KV cache (the non-expert weights and workspace are not modelled here),
// an HF checkpoint's KV cache, or a timeline and peaks rescaled together.

var (
	IDPhysVRAMFloor = def("physics", "physics.vram-floor", Error,
		"on cuda a VRAM peak (device or process) is below the resident expert bytes the worker placed (preparation.h2d_bytes) plus its KV cache (a synthetic preset's layers x 2 x kv_heads x head_dim x positions x 4 or 2 bytes by artifact.kv_dtype), or the process peak exceeds the device peak")
	IDPhysRSSFloor = def("physics", "physics.rss-floor", Error,
		"the worker's RSS peak is below the host authority it holds resident (preparation.authority_bytes)")
	IDPhysTimelineMissing = def("physics", "physics.vram-timeline-missing", Error,
		"a cuda worker has no VRAM timeline while other cuda workers of the edition have one")
)

func checkMemoryFloor(ws []physWorker, fs *findings) {
	withTimeline, without := 0, []*worker{}
	for _, pw := range ws {
		w := pw.w
		r := w.rec
		if rss := r.Observations.RSSPeakBytes; rss.Ok() && rss.Value < r.Preparation.AuthorityBytes {
			fs.add(IDPhysRSSFloor, w.path, "/observations/rss_peak_bytes", ">= "+itoa64(r.Preparation.AuthorityBytes), rss.Value,
				"the RSS peak is below the %d bytes of the host authority the worker kept resident", r.Preparation.AuthorityBytes)
		}
		if r.Environment.Device != "cuda" {
			continue
		}
		if len(r.Observations.VRAMTimeline) > 0 {
			withTimeline++
		} else {
			without = append(without, w)
		}
		placed := r.Preparation.H2DBytes
		kv, kvKnown := kvCacheBytes(r)
		floor := placed + kv
		what := "experts the worker placed on the device and kept resident"
		if kvKnown {
			what = "experts the worker placed on the device (" + itoa64(placed) + ") and its " + r.Artifact.KVDTypeOf() + " KV cache (" + itoa64(kv) + "), both resident"
		}
		o := r.Observations
		for _, x := range []struct {
			ptr, what string
			ok        bool
			value     int64
		}{
			{"/observations/vram_peak_bytes", "device VRAM peak", o.VRAMPeakBytes.Ok(), o.VRAMPeakBytes.Value},
			{"/observations/vram_process_peak_bytes", "process VRAM peak", o.VRAMProcessPeakBytes.Ok(), o.VRAMProcessPeakBytes.Value},
		} {
			if x.ok && x.value < floor {
				fs.add(IDPhysVRAMFloor, w.path, x.ptr, ">= "+itoa64(floor), x.value,
					"the %s is below the %d bytes of %s", x.what, floor, what)
			}
		}
		if o.VRAMPeakBytes.Ok() && o.VRAMProcessPeakBytes.Ok() && o.VRAMProcessPeakBytes.Value > o.VRAMPeakBytes.Value {
			fs.add(IDPhysVRAMFloor, w.path, "/observations/vram_process_peak_bytes", "<= "+itoa64(o.VRAMPeakBytes.Value), o.VRAMProcessPeakBytes.Value,
				"the process's VRAM peak exceeds the device-wide peak that includes it")
		}
	}
	if withTimeline > 0 {
		for _, w := range without {
			fs.add(IDPhysTimelineMissing, w.path, "/observations/vram_timeline", "a VRAM timeline", nil,
				"%d other cuda workers of the edition carry a VRAM timeline; this one has none", withTimeline)
		}
	}
}

func itoa64(x int64) string { return strconv.FormatInt(x, 10) }

// syntheticKV is the KV cache shape of runtime/model's synthetic presets:
// layers and kv_heads x head_dim (K's width; V's is the same).
var syntheticKV = map[string]struct{ layers, kvDim int }{
	"olmoe-1b-7b":     {16, 16 * 128},
	"qwen15-moe-a27b": {24, 16 * 128},
	"olmoe-tiny":      {4, 4 * 64},
	"qwen2moe-tiny":   {4, 4 * 64},
}

// kvBytesPerElement is a KV cache element's size by artifact.kv_dtype.
var kvBytesPerElement = map[string]int64{editions.KVFP32: 4, editions.KVFP16: 2}

// kvCacheBytes is the KV cache a worker allocated at the least: layers x 2
// x kv dim x positions x element bytes, positions the most prompt + output
// tokens of its requests capped at the recorded context. ok is false where
// the shape is unknown (an HF checkpoint, an unknown preset) or the
// kv_dtype is not one the runtime has.
func kvCacheBytes(r *editions.RawRecord) (int64, bool) {
	shape, known := syntheticKV[r.Checkpoint.Arch]
	elem, dtype := kvBytesPerElement[r.Artifact.KVDTypeOf()]
	if r.Checkpoint.Kind != "synthetic" || !known || !dtype {
		return 0, false
	}
	positions := 0
	for _, q := range r.Requests {
		positions = max(positions, q.PromptTokens+q.N)
	}
	if mp := r.Setup.Model.MaxPositions; mp > 0 {
		positions = min(positions, mp)
	}
	return int64(shape.layers) * 2 * int64(shape.kvDim) * int64(positions) * elem, true
}
