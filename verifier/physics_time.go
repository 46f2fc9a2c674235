package verifier

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Time is physical. A worker's started_at/finished_at are wall-clock reads
// taken by the worker process around everything it reports: preparation
// (from process start to admission), the warmup and the measured requests,
// which run one after another. So the reported work cannot exceed the wall
// clock, and the wall clock cannot hold much that the record does not
// account for (tokenising the prompts, reading the observations, writing
// the record). Measured on the committed editions: the gap wall - work is
// 0.001-0.004 s on the CPU (smoke-cpu) and 0.15-0.27 s on the H200 (CUDA
// context teardown, NVML); the slack below leaves room for a slow host.
//
// Workers are separate processes run one at a time on a device
// (campaigns.Run locally; one job array task per GPU, or per node on the
// cpu, under a cluster scheduler), so the wall-clock intervals of workers
// on one host and one set of GPUs (environment.hostname and .gpus) never
// overlap. Workers on other hosts or GPUs of a cluster may. Per-token timestamps come from
// a monotonic nanosecond clock, one read per token after it was produced:
// strictly increasing and positive. The VRAM sampler starts with the
// worker and stops after its last request, so its timeline spans the
// worker. Two requests with identical token timestamps do not happen on a
// nanosecond clock: a copied record (block 3 = block 1 with the block
// number fixed) is a forgery.
//
// What this cannot catch: a run whose timestamps, wall clocks and VRAM
// timeline were all rescaled together is physically consistent (only a
// reproduction or a trusted signature speaks to that). Since a cluster's
// workers may overlap on other hosts or GPUs, a forger who renames the
// host (or the GPU indices) of two overlapping workers passes the overlap
// check; under hosts: mixed that rename must then hold for the whole
// configuration (physics.hosts-mixed), under uniform nothing else asks.

// The slack of the wall-clock bounds, in seconds.
const (
	// wallOverrun is how far the reported work may exceed the wall clock
	// (the clocks are read at slightly different instants).
	wallOverrun = 0.05
	// wallGapFloor and wallGapFraction bound the unaccounted wall clock:
	// wall - work <= max(wallGapFloor, wallGapFraction x wall).
	wallGapFloor    = 1.0
	wallGapFraction = 0.10
	// timelineFirstMax is the latest the VRAM timeline's first sample may
	// be taken (the sampler reads at once, then every 20 ms).
	timelineFirstMax = 0.25
)

// wallGapAllowed is the unaccounted wall clock a worker of wall seconds may
// have.
func wallGapAllowed(wall float64) float64 { return max(wallGapFloor, wallGapFraction*wall) }

var (
	IDPhysWallClock = def("physics", "physics.wall-clock", Error,
		"a worker's wall clock (finished_at - started_at) does not bound preparation + warmup + sum(runtime_seconds): work > wall + 0.05 s, or wall - work > max(1 s, 10% of wall), or the times do not parse or run backwards")
	IDPhysTimestampsStrict = def("physics", "physics.timestamps-strict", Error,
		"two per-token timestamps of a request are equal, or the first is 0 (a token is produced after admission, one at a time, on a nanosecond clock)")
	IDPhysTimelineSpan = def("physics", "physics.vram-timeline-span", Error,
		"a VRAM timeline does not span its worker: first sample after 0.25 s, last sample beyond wall + 0.05 s or more than max(1 s, 10% of wall) before its end, or two samples at the same instant")
	IDPhysIdenticalTimings = def("physics", "physics.identical-timings", Error,
		"two measured requests of the edition have identical token_ns arrays (a copied record; with one token, the same token_ns and prefill_seconds), reported once per worker")
	IDPhysWorkerOverlap = def("physics", "physics.worker-overlap", Error,
		"two workers' wall-clock intervals overlap on one host and set of GPUs (workers run one at a time on a device)")
)

// parseWall returns the worker's wall-clock interval.
func parseWall(started, finished string) (time.Time, time.Time, error) {
	a, err := time.Parse(time.RFC3339Nano, started)
	if err != nil {
		return a, a, fmt.Errorf("started_at: %w", err)
	}
	b, err := time.Parse(time.RFC3339Nano, finished)
	if err != nil {
		return a, b, fmt.Errorf("finished_at: %w", err)
	}
	return a, b, nil
}

type wallInterval struct {
	path       string
	start, end time.Time
	slot       string // host and GPUs: intervals of one slot never overlap
}

func checkTimePhysics(ws []physWorker, fs *findings) {
	var intervals []wallInterval
	seen := map[string]string{} // token_ns fingerprint -> "path#pointer" of its first request
	for _, pw := range ws {
		w := pw.w
		r := w.rec
		wall := -1.0
		start, end, err := parseWall(r.StartedAt, r.FinishedAt)
		switch {
		case err != nil:
			fs.add(IDPhysWallClock, w.path, "", "RFC 3339 started_at and finished_at", nil, "the wall clock cannot be read: %v", err)
		case !end.After(start):
			fs.add(IDPhysWallClock, w.path, "/finished_at", "after "+r.StartedAt, r.FinishedAt, "the worker finished before it started")
		default:
			wall = end.Sub(start).Seconds()
			intervals = append(intervals, wallInterval{w.path, start, end, strconv.Quote(r.Environment.Hostname) + " " + strconv.Quote(r.Environment.GPUs)})
		}
		work := r.Preparation.Seconds + r.Warmup.Seconds
		for _, q := range r.Requests {
			work += q.RuntimeSeconds
		}
		if wall > 0 {
			switch gap := wall - work; {
			case work > wall+wallOverrun:
				fs.add(IDPhysWallClock, w.path, "/finished_at", fmt.Sprintf("work <= wall + %g s", wallOverrun), work,
					"the worker reports %.6f s of work (preparation + warmup + requests) in %.6f s of wall clock", work, wall)
			case gap > wallGapAllowed(wall):
				fs.add(IDPhysWallClock, w.path, "/finished_at", fmt.Sprintf("wall - work <= %.3f s", wallGapAllowed(wall)), gap,
					"%.6f s of the worker's %.6f s wall clock are not accounted for by its preparation, warmup and requests (%.6f s): its timings were shrunk or its wall clock stretched",
					gap, wall, work)
			}
		}
		checkTimelineSpan(w, wall, fs)

		dups, first := 0, ""
		for i, q := range r.Requests {
			ns := q.TokenNs
			for j := range ns {
				if (j == 0 && ns[0] == 0) || (j > 0 && ns[j] == ns[j-1]) {
					fs.add(IDPhysTimestampsStrict, w.path, ptr("requests", i, "token_ns", j), "a later instant than the previous token (and > 0)", ns[j],
						"request %d: token %d has the same timestamp as the one before it (or admission)", i, j)
					break
				}
			}
			fp := fingerprintNs(ns)
			if len(ns) < 2 {
				// One timestamp alone may coincide; with the request's
				// prefill time beside it (one output token: a prefill
				// edition) the pair is the request's own.
				p := q.PrefillSeconds
				if p == nil || !p.Ok() {
					continue
				}
				fp += "/prefill " + strconv.FormatFloat(p.Value, 'g', -1, 64)
			}
			here := w.path + "#" + ptr("requests", i, "token_ns")
			if prev, ok := seen[fp]; ok {
				if dups == 0 {
					first = fmt.Sprintf("request %d has the token_ns of %s", i, prev)
				}
				dups++
			} else {
				seen[fp] = here
			}
		}
		if dups > 0 {
			fs.add(IDPhysIdenticalTimings, w.path, "/requests", "timings of its own", dups,
				"%d measured request(s) repeat the nanosecond timings of another request (%s): the record is a copy", dups, first)
		}
	}

	sort.SliceStable(intervals, func(i, j int) bool { return intervals[i].start.Before(intervals[j].start) })
	lastOf := map[string]*wallInterval{} // by slot
	for i := range intervals {
		x := &intervals[i]
		last := lastOf[x.slot]
		if last != nil && x.start.Before(last.end) {
			fs.add(IDPhysWorkerOverlap, x.path, "/started_at", "after "+last.end.Format(time.RFC3339Nano), x.start.Format(time.RFC3339Nano),
				"the worker started while %s was still running on the same host and GPUs (workers run one at a time on a device)", last.path)
		}
		if last == nil || x.end.After(last.end) {
			lastOf[x.slot] = x
		}
	}
}

func fingerprintNs(ns []int64) string {
	var b strings.Builder
	for _, x := range ns {
		b.WriteString(strconv.FormatInt(x, 10))
		b.WriteByte(',')
	}
	return b.String()
}

// checkTimelineSpan holds a worker's VRAM timeline to its wall clock (wall
// < 0: unknown, only the order is checked). Decreasing times are
// recompute.vram-timeline's.
func checkTimelineSpan(w *worker, wall float64, fs *findings) {
	tl := w.rec.Observations.VRAMTimeline
	if len(tl) == 0 {
		return
	}
	const p = "/observations/vram_timeline"
	for i := 1; i < len(tl); i++ {
		if tl[i].AtNs == tl[i-1].AtNs {
			fs.add(IDPhysTimelineSpan, w.path, ptr("observations", "vram_timeline", i, "at_ns"), "> "+strconv.FormatInt(tl[i-1].AtNs, 10), tl[i].AtNs,
				"samples %d and %d were taken at the same instant", i-1, i)
			break
		}
	}
	first, lastAt := float64(tl[0].AtNs)/1e9, float64(tl[len(tl)-1].AtNs)/1e9
	if tl[0].AtNs < 0 || first > timelineFirstMax {
		fs.add(IDPhysTimelineSpan, w.path, p+"/0/at_ns", fmt.Sprintf("0..%g s", timelineFirstMax), first,
			"the sampler reads at once when the worker starts; its first sample is at %.6f s", first)
	}
	if wall < 0 {
		return
	}
	switch {
	case lastAt > wall+wallOverrun:
		fs.add(IDPhysTimelineSpan, w.path, ptr("observations", "vram_timeline", len(tl)-1, "at_ns"), fmt.Sprintf("<= %.6f s (the wall clock)", wall), lastAt,
			"the last VRAM sample is %.6f s after the worker started, but the worker ran %.6f s", lastAt, wall)
	case wall-lastAt > wallGapAllowed(wall):
		fs.add(IDPhysTimelineSpan, w.path, ptr("observations", "vram_timeline", len(tl)-1, "at_ns"), fmt.Sprintf(">= %.6f s", wall-wallGapAllowed(wall)), lastAt,
			"the VRAM timeline ends %.6f s before the worker's wall clock (%.6f s) does; the sampler runs to the last request", wall-lastAt, wall)
	}
}
