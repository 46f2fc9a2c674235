package device

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"unsafe"
)

// HostRanges is the bookkeeping of registered host memory a Device keeps
// so that CopyHostToRow can refuse a source outside it (both CPUDevice and
// the CUDA device use it; the driver itself would silently fall back to a
// slow pageable copy). The zero value is empty and ready; methods may be
// called from several goroutines.
type HostRanges struct {
	mu    sync.Mutex
	spans []hostSpan
}

// hostSpan is one registered range [lo, hi).
type hostSpan struct{ lo, hi uintptr }

func spanOf(b []byte) hostSpan {
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return hostSpan{lo, lo + uintptr(len(b))}
}

// Add records mem as registered. It fails for empty memory and for a range
// that overlaps one already registered (as cuMemHostRegister does). The
// returned function removes it; a second call fails.
func (h *HostRanges) Add(mem []byte) (remove func() error, err error) {
	if len(mem) == 0 {
		return nil, errors.New("register 0 bytes of host memory")
	}
	s := spanOf(mem)
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, o := range h.spans {
		if s.lo < o.hi && o.lo < s.hi {
			return nil, fmt.Errorf("host memory [%#x, %#x) overlaps registered [%#x, %#x)", s.lo, s.hi, o.lo, o.hi)
		}
	}
	h.spans = append(h.spans, s)
	return func() error {
		h.mu.Lock()
		defer h.mu.Unlock()
		i := slices.Index(h.spans, s)
		if i < 0 {
			return fmt.Errorf("host memory [%#x, %#x) is not registered (unregistered twice?)", s.lo, s.hi)
		}
		h.spans = slices.Delete(h.spans, i, i+1)
		return nil
	}, nil
}

// Check returns nil when src lies inside one registered range, and an
// error wrapping ErrNotRegistered otherwise.
func (h *HostRanges) Check(src []byte) error {
	s := spanOf(src)
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, o := range h.spans {
		if s.lo != 0 && o.lo <= s.lo && s.hi <= o.hi {
			return nil
		}
	}
	return fmt.Errorf("%d bytes at %#x (%d ranges registered): %w", len(src), s.lo, len(h.spans), ErrNotRegistered)
}

// Len is the number of registered ranges.
func (h *HostRanges) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.spans)
}
