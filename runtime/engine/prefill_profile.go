package engine

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/horizon-runmap/horizon/runtime/backend"
)

// PrefillProfile is a diagnostic of batched prefill: the wall time of each
// plan instruction kind, the backend waited on (backend.Waiter) before and
// after every instruction so that each one's host issue and device work
// are counted together and alone. The waits serialise what would overlap,
// so the total is above an unprofiled prefill's; it says where the time
// goes, not how fast prefill is.
type PrefillProfile struct {
	Seconds map[string]float64 // instruction kind -> seconds, summed
	Count   map[string]int     // instruction kind -> instructions
	t0      time.Time
}

// ProfilePrefill turns the profile on (a fresh one) or off (nil) and
// returns it.
func (e *Engine) ProfilePrefill(on bool) *PrefillProfile {
	e.prof = nil
	if on {
		e.prof = &PrefillProfile{Seconds: map[string]float64{}, Count: map[string]int{}}
	}
	return e.prof
}

func (p *PrefillProfile) wait(be backend.Backend) error {
	if w, ok := be.(backend.Waiter); ok {
		if err := w.Wait(); err != nil {
			return fmt.Errorf("prefill profile: %w", err)
		}
	}
	return nil
}

func (p *PrefillProfile) begin(be backend.Backend) error {
	if err := p.wait(be); err != nil {
		return err
	}
	p.t0 = time.Now()
	return nil
}

func (p *PrefillProfile) end(be backend.Backend, kind string) error { return p.lap(be, kind) }

// lap waits, then adds the time since the last begin or lap to kind.
func (p *PrefillProfile) lap(be backend.Backend, kind string) error {
	if err := p.wait(be); err != nil {
		return err
	}
	now := time.Now()
	p.Seconds[kind] += now.Sub(p.t0).Seconds()
	p.Count[kind]++
	p.t0 = now
	return nil
}

// lapOf is lap on a profile that may be nil (off).
func (p *PrefillProfile) lapOf(be backend.Backend, kind string) error {
	if p == nil {
		return nil
	}
	return p.lap(be, kind)
}

// String lists the kinds, longest first: seconds, share and count.
func (p *PrefillProfile) String() string {
	kinds := make([]string, 0, len(p.Seconds))
	total := 0.0
	for k, s := range p.Seconds {
		kinds = append(kinds, k)
		total += s
	}
	slices.SortFunc(kinds, func(a, b string) int {
		if p.Seconds[a] != p.Seconds[b] {
			if p.Seconds[a] > p.Seconds[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	var b strings.Builder
	for _, k := range kinds {
		fmt.Fprintf(&b, "%s %.3f ms (%.1f%%, %d) ", k, p.Seconds[k]*1e3, 100*p.Seconds[k]/total, p.Count[k])
	}
	fmt.Fprintf(&b, "total %.3f ms", total*1e3)
	return b.String()
}
