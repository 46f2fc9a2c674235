package editions

import (
	"fmt"

	"github.com/horizon-runmap/horizon/eviction"
)

// Decoded returns the trace's events, checking its format and its
// declared event count.
func (t *RoutingTrace) Decoded() ([]eviction.Event, error) {
	evs, err := eviction.DecodeFormat(t.Format, t.Data)
	if err != nil {
		return nil, err
	}
	if len(evs) != t.Events {
		return nil, fmt.Errorf("routing trace declares %d events and holds %d: %w", t.Events, len(evs), eviction.ErrTrace)
	}
	return evs, nil
}

// TraceWorker returns one worker's routing, its warmup's trace then its
// requests' in order; false when none of them carries a trace (a record
// written before traces were recorded). Some but not all is an error.
func TraceWorker(warmup *RoutingTrace, requests []*RoutingTrace) (eviction.Worker, bool, error) {
	have := 0
	if warmup != nil {
		have++
	}
	for _, q := range requests {
		if q != nil {
			have++
		}
	}
	if have == 0 {
		return eviction.Worker{}, false, nil
	}
	if have != 1+len(requests) {
		return eviction.Worker{}, false, fmt.Errorf("%d of the warmup and %d requests carry a routing trace", have, len(requests))
	}
	var w eviction.Worker
	var err error
	if w.Warmup, err = warmup.Decoded(); err != nil {
		return w, false, fmt.Errorf("warmup: %w", err)
	}
	for i, q := range requests {
		evs, err := q.Decoded()
		if err != nil {
			return w, false, fmt.Errorf("request %d: %w", i, err)
		}
		w.Requests = append(w.Requests, evs)
	}
	return w, true, nil
}
