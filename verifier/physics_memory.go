package verifier

import "strconv"

// Memory has a floor. On CUDA the experts a worker placed
// (preparation.h2d_bytes: capacity x layers records) stay resident on the
// device for the whole worker, so the device-wide VRAM peak and the
// process's own peak are at least that much; and the process's memory is
// part of the device's, so its peak never exceeds the device's. The
// sampler that measures the peaks also writes the VRAM timeline: in an
// edition whose CUDA workers carry timelines, a CUDA worker without one
// dropped it. On every device the host authority (a complete host-RAM
// copy of every expert record, preparation.authority_bytes, itself checked
// against experts x layers x record_bytes) is resident from preparation to
// the last request, so the worker's RSS peak is at least its size.
//
// What this cannot catch: peaks lowered but kept above the placement (the
// non-expert weights, KV cache and workspace are not modelled here), or a
// timeline and peaks rescaled together.

var (
	IDPhysVRAMFloor = def("physics", "physics.vram-floor", Error,
		"on cuda a VRAM peak (device or process) is below the resident expert bytes the worker placed (preparation.h2d_bytes), or the process peak exceeds the device peak")
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
		o := r.Observations
		for _, x := range []struct {
			ptr, what string
			ok        bool
			value     int64
		}{
			{"/observations/vram_peak_bytes", "device VRAM peak", o.VRAMPeakBytes.Ok(), o.VRAMPeakBytes.Value},
			{"/observations/vram_process_peak_bytes", "process VRAM peak", o.VRAMProcessPeakBytes.Ok(), o.VRAMProcessPeakBytes.Value},
		} {
			if x.ok && x.value < placed {
				fs.add(IDPhysVRAMFloor, w.path, x.ptr, ">= "+itoa64(placed), x.value,
					"the %s is below the %d bytes of experts the worker placed on the device and kept resident", x.what, placed)
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
