package cuda

import "slices"

// The attention trace's summary (tuning.attTrace, step_att_trace.go): pure
// arithmetic on the records read back, so it is tested without a GPU.

// attBlock is one block's record, read back.
type attBlock struct {
	entry, start, end uint64 // ns on the device's globaltimer
	sm                int
	cycles            uint32
}

// attLaunch summarises one layer's attention launch of the last step.
type attLaunch struct {
	// span: µs from the first block's entry to the last block's end; run:
	// from the first block's start (its wait returned) to the last end.
	span, run float64
	// blockMean: the mean µs from a block's start to its end.
	blockMean float64
	// late: blocks that became resident only after another block of the
	// launch had ended (a second wave).
	late int
	// maxPerSM: the most blocks of the launch on one SM; sms: how many SMs
	// ran one.
	maxPerSM, sms int
	// startSpread: µs from the first block's start to the last block's
	// start (a second wave starts late); endSpread: from the first block's
	// end to the last's (the tail the last block merges in).
	startSpread, endSpread float64
	// firstStart, lastEnd: the device clock (ns) at the first block's start
	// and the last block's end, so that consecutive layers' launches give
	// the time between them (the rest of the layer).
	firstStart, lastEnd uint64
	blocks              []attBlock
}

// attBetween is the µs from each launch's last end to the next launch's
// first start, summed: the step's time outside its attention launches,
// between the first layer's and the last layer's.
func attBetween(ls []attLaunch) float64 {
	sum := 0.0
	for i := 1; i < len(ls); i++ {
		sum += float64(int64(ls[i].firstStart-ls[i-1].lastEnd)) / 1e3
	}
	return sum
}

// summariseAttLaunch computes a launch's attLaunch from its blocks.
func summariseAttLaunch(bl []attBlock) attLaunch {
	a := attLaunch{blocks: bl}
	if len(bl) == 0 {
		return a
	}
	first, firstStart, last, firstEnd, lastStart := bl[0].entry, bl[0].start, bl[0].end, bl[0].end, bl[0].start
	perSM := map[int]int{}
	sum := 0.0
	for _, x := range bl {
		first, firstStart = min(first, x.entry), min(firstStart, x.start)
		last, firstEnd, lastStart = max(last, x.end), min(firstEnd, x.end), max(lastStart, x.start)
		perSM[x.sm]++
		sum += float64(x.end-x.start) / 1e3
	}
	for _, x := range bl {
		if x.entry > firstEnd {
			a.late++
		}
	}
	counts := make([]int, 0, len(perSM))
	for _, c := range perSM {
		counts = append(counts, c)
	}
	a.span, a.run = float64(last-first)/1e3, float64(last-firstStart)/1e3
	a.blockMean = sum / float64(len(bl))
	a.maxPerSM, a.sms = slices.Max(counts), len(perSM)
	a.startSpread, a.endSpread = float64(lastStart-firstStart)/1e3, float64(last-firstEnd)/1e3
	a.firstStart, a.lastEnd = firstStart, last
	return a
}
