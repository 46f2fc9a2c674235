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
	// KindBatch is a wave of a batched prefill (runtime/engine): a group
	// of distinct experts leased and served once for Uses[i] >= 1 routed
	// (token, slot) lookups of IDs[i]. The first lookup of each expert is
	// counted as a lease's is; the others are hits, since they read the
	// row the lease holds. The policy sees the group once, as a lease.
	KindBatch Kind = 3
)

func (k Kind) String() string {
	switch k {
	case KindLease:
		return "lease"
	case KindPrefetch:
		return "prefetch"
	case KindBatch:
		return "batch"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Event is one call on one layer: the routed (or predicted) expert ids in
// routing order and, for a batch, the lookups of each.
type Event struct {
	Kind  Kind
	Layer int
	IDs   []int
	Uses  []int // KindBatch only: Uses[i] lookups of IDs[i]
}

// Lookups is the routed lookups the event serves: a lease's group size, a
// batch's uses, none for a prediction.
func (ev Event) Lookups() int {
	switch ev.Kind {
	case KindLease:
		return len(ev.IDs)
	case KindBatch:
		n := 0
		for _, u := range ev.Uses {
			n += u
		}
		return n
	}
	return 0
}

// Trace formats. TraceFormat (v2) adds batch events to v1, whose traces
// (lease and prefetch events only) it reads unchanged.
const (
	TraceFormat   = "eviction-trace-v2"
	TraceFormatV1 = "eviction-trace-v1"
)

// MaxUses is the most lookups one batch event gives an expert (two bytes).
const MaxUses = 65535

// Limits of the encoding: a layer index and an expert id are one byte
// each (OLMoE has 16 layers of 64 experts, Qwen1.5-MoE 24 of 60), a group
// holds at most 255 ids.
const (
	MaxLayers  = 256
	MaxExperts = 256
	MaxGroup   = 255
)

// Encode packs events as TraceFormat: per event the bytes kind, layer,
// n, then n expert ids, one byte each, and for a batch n uses, two bytes
// each (little-endian); base64 (standard, padded) of that.
func Encode(events []Event) (string, error) {
	n := 0
	for _, ev := range events {
		n += 3 + len(ev.IDs) + 2*len(ev.Uses)
	}
	b := make([]byte, 0, n)
	for i, ev := range events {
		if ev.Kind != KindLease && ev.Kind != KindPrefetch && ev.Kind != KindBatch {
			return "", fmt.Errorf("eviction: trace event %d: kind %d", i, ev.Kind)
		}
		if (ev.Kind == KindBatch) != (ev.Uses != nil) || ev.Uses != nil && len(ev.Uses) != len(ev.IDs) {
			return "", fmt.Errorf("eviction: trace event %d (%s): %d uses for %d ids", i, ev.Kind, len(ev.Uses), len(ev.IDs))
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
		for _, u := range ev.Uses {
			if u < 1 || u > MaxUses {
				return "", fmt.Errorf("eviction: trace event %d: %d uses, want 1..%d", i, u, MaxUses)
			}
			b = append(b, byte(u), byte(u>>8))
		}
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// ErrTrace is wrapped by every decoding error.
var ErrTrace = errors.New("malformed routing trace")

// Decode reverses Encode (TraceFormat).
func Decode(s string) ([]Event, error) { return DecodeFormat(TraceFormat, s) }

// DecodeFormat decodes a trace of the named format: TraceFormatV1 has no
// batch events.
func DecodeFormat(format, s string) ([]Event, error) {
	if format != TraceFormat && format != TraceFormatV1 {
		return nil, fmt.Errorf("eviction: %w: format %q, known: %s, %s", ErrTrace, format, TraceFormat, TraceFormatV1)
	}
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
		if k != KindLease && k != KindPrefetch && (k != KindBatch || format == TraceFormatV1) {
			return nil, fmt.Errorf("eviction: %w: event %d at byte %d: kind %d (format %s)", ErrTrace, len(out), off, k, format)
		}
		size := n
		if k == KindBatch {
			size = 3 * n
		}
		if n == 0 || len(b)-off-3 < size {
			return nil, fmt.Errorf("eviction: %w: event %d at byte %d: group of %d ids, %d bytes left", ErrTrace, len(out), off, n, len(b)-off-3)
		}
		ev := Event{Kind: k, Layer: layer, IDs: make([]int, n)}
		for i := range ev.IDs {
			ev.IDs[i] = int(b[off+3+i])
		}
		if k == KindBatch {
			ev.Uses = make([]int, n)
			for i := range ev.Uses {
				p := off + 3 + n + 2*i
				ev.Uses[i] = int(b[p]) | int(b[p+1])<<8
				if ev.Uses[i] == 0 {
					return nil, fmt.Errorf("eviction: %w: event %d at byte %d: expert %d has 0 uses", ErrTrace, len(out), off, ev.IDs[i])
				}
			}
		}
		out = append(out, ev)
		off += 3 + size
	}
	return out, nil
}
