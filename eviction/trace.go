package eviction

import (
	"encoding/base64"
	"errors"
	"fmt"
)

// A routing trace is what the residency cache was asked, in order: every
// routed group a layer leased (and served) and every predicted group a
// prefetch asked for. The cache's counters are a deterministic function
// of the trace, the initial placement, the capacity and the policy, so a
// verifier can replay a trace and demand the recorded counters, and a
// simulator can ask what another policy or capacity would have done.

// Kind is what the cache was asked.
type Kind uint8

const (
	// KindLease is a routed group: leased and served (hits and misses
	// counted).
	KindLease Kind = 1
	// KindPrefetch is a predicted group passed to Prefetch.
	KindPrefetch Kind = 2
)

func (k Kind) String() string {
	switch k {
	case KindLease:
		return "lease"
	case KindPrefetch:
		return "prefetch"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Event is one call on one layer: the routed (or predicted) expert ids in
// routing order.
type Event struct {
	Kind  Kind
	Layer int
	IDs   []int
}

// TraceFormat names the encoding of Encode.
const TraceFormat = "eviction-trace-v1"

// Limits of the encoding: a layer index and an expert id are one byte
// each (OLMoE has 16 layers of 64 experts, Qwen1.5-MoE 24 of 60), a group
// holds at most 255 ids.
const (
	MaxLayers  = 256
	MaxExperts = 256
	MaxGroup   = 255
)

// Encode packs events as TraceFormat: per event the bytes kind, layer,
// n, then n expert ids, one byte each; base64 (standard, padded) of that.
func Encode(events []Event) (string, error) {
	n := 0
	for _, ev := range events {
		n += 3 + len(ev.IDs)
	}
	b := make([]byte, 0, n)
	for i, ev := range events {
		if ev.Kind != KindLease && ev.Kind != KindPrefetch {
			return "", fmt.Errorf("eviction: trace event %d: kind %d", i, ev.Kind)
		}
		if ev.Layer < 0 || ev.Layer >= MaxLayers {
			return "", fmt.Errorf("eviction: trace event %d: layer %d outside 0..%d", i, ev.Layer, MaxLayers-1)
		}
		if len(ev.IDs) == 0 || len(ev.IDs) > MaxGroup {
			return "", fmt.Errorf("eviction: trace event %d: group of %d ids, want 1..%d", i, len(ev.IDs), MaxGroup)
		}
		b = append(b, byte(ev.Kind), byte(ev.Layer), byte(len(ev.IDs)))
		for _, e := range ev.IDs {
			if e < 0 || e >= MaxExperts {
				return "", fmt.Errorf("eviction: trace event %d: expert %d outside 0..%d", i, e, MaxExperts-1)
			}
			b = append(b, byte(e))
		}
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// ErrTrace is wrapped by every decoding error.
var ErrTrace = errors.New("malformed routing trace")

// Decode reverses Encode.
func Decode(s string) ([]Event, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("eviction: %w: base64: %v", ErrTrace, err)
	}
	var out []Event
	for off := 0; off < len(b); {
		if len(b)-off < 3 {
			return nil, fmt.Errorf("eviction: %w: event %d at byte %d: truncated header", ErrTrace, len(out), off)
		}
		k, layer, n := Kind(b[off]), int(b[off+1]), int(b[off+2])
		if k != KindLease && k != KindPrefetch {
			return nil, fmt.Errorf("eviction: %w: event %d at byte %d: kind %d", ErrTrace, len(out), off, k)
		}
		if n == 0 || len(b)-off-3 < n {
			return nil, fmt.Errorf("eviction: %w: event %d at byte %d: group of %d ids, %d bytes left", ErrTrace, len(out), off, n, len(b)-off-3)
		}
		ids := make([]int, n)
		for i := range ids {
			ids[i] = int(b[off+3+i])
		}
		out = append(out, Event{Kind: k, Layer: layer, IDs: ids})
		off += 3 + n
	}
	return out, nil
}
