package observe

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// VRAMSample is one reading of device memory.
type VRAMSample struct {
	AtNs        int64 // ns since the sampler started
	DeviceUsed  int64 // device-wide used bytes (driver view)
	ProcessUsed int64 // this process's bytes; -1 when the driver did not say
}

// VRAMReport summarises a sampler's run: the peaks and the whole timeline.
type VRAMReport struct {
	DevicePeak  int64 // max DeviceUsed over Samples
	ProcessPeak int64 // max ProcessUsed over Samples; -1 when never observed
	// Samples is the timeline, in sampling order (AtNs never decreases):
	// one sample at the start, one per interval, one at Stop. Readings
	// that failed are left out, not recorded as zeros.
	Samples []VRAMSample
}

// VRAMSampler samples device memory on a goroutine until stopped.
type VRAMSampler interface {
	// Stop ends sampling (taking one last sample) and reports. It fails
	// when no reading succeeded; calling it again returns the same result.
	Stop() (VRAMReport, error)
}

// DefaultVRAMInterval is the sampling period: fine enough to see a
// worker's allocation phases, coarse enough to cost nothing measurable.
const DefaultVRAMInterval = 20 * time.Millisecond

// SummarizeVRAM computes the peaks of a timeline. A sample's ProcessUsed
// below zero means "not observed": it never counts as a peak, and with no
// observed sample ProcessPeak is -1 (never 0).
func SummarizeVRAM(samples []VRAMSample) VRAMReport {
	r := VRAMReport{ProcessPeak: -1, Samples: samples}
	for _, s := range samples {
		r.peak(s)
	}
	return r
}

// peak raises the peaks to cover s.
func (r *VRAMReport) peak(s VRAMSample) {
	r.DevicePeak = max(r.DevicePeak, s.DeviceUsed)
	if s.ProcessUsed >= 0 {
		r.ProcessPeak = max(r.ProcessPeak, s.ProcessUsed)
	}
}

// procMem is one process entry of the driver's running-process list.
type procMem struct {
	Pid  uint32
	Used uint64 // bytes; math.MaxUint64 is NVML_VALUE_NOT_AVAILABLE
}

// processBytes is pid's device memory in a running-process list, or -1
// when pid is not listed or the driver withholds its usage (NVML reports
// NVML_VALUE_NOT_AVAILABLE, e.g. without the permission or under MIG). A
// process listed more than once (one entry per GPU or compute instance)
// uses the sum of its entries.
func processBytes(procs []procMem, pid int) int64 {
	total, found := int64(0), false
	for _, p := range procs {
		if int(p.Pid) != pid {
			continue
		}
		if p.Used > math.MaxInt64 {
			return -1
		}
		total += int64(p.Used)
		found = true
	}
	if !found {
		return -1
	}
	return total
}

// vramReader reads device-wide used bytes and this process's bytes (-1:
// not observed) once.
type vramReader func() (deviceUsed, processUsed int64, err error)

// pollSampler calls a vramReader at start, every interval and at Stop, and
// keeps the timeline. It is the NVML sampler without NVML, so its logic is
// tested on machines with no GPU.
type pollSampler struct {
	read    vramReader
	release func() error // frees the reader's resources after the last read; may be nil
	start   time.Time
	stop    chan struct{}
	done    chan struct{}

	mu      sync.Mutex
	report  VRAMReport
	failed  int   // readings that failed
	lastErr error // the last failure

	once   sync.Once
	result VRAMReport
	err    error
}

// startPolling takes the first sample at once, then one per interval on a
// goroutine until Stop.
func startPolling(read vramReader, interval time.Duration, release func() error) (*pollSampler, error) {
	if interval <= 0 {
		return nil, fmt.Errorf("VRAM sampling interval %v: must be positive", interval)
	}
	s := &pollSampler{read: read, release: release, start: time.Now(), stop: make(chan struct{}), done: make(chan struct{}),
		report: VRAMReport{ProcessPeak: -1}}
	s.sample()
	go func() {
		defer close(s.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				s.sample()
				return
			case <-t.C:
				s.sample()
			}
		}
	}()
	return s, nil
}

func (s *pollSampler) sample() {
	dev, proc, err := s.read()
	at := time.Since(s.start).Nanoseconds()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.failed++
		s.lastErr = err
		return
	}
	if proc < 0 {
		proc = -1
	}
	smp := VRAMSample{AtNs: at, DeviceUsed: dev, ProcessUsed: proc}
	s.report.Samples = append(s.report.Samples, smp)
	s.report.peak(smp)
}

// Stop implements VRAMSampler. A failed release does not void the samples
// already taken: it is reported only when there are none.
func (s *pollSampler) Stop() (VRAMReport, error) {
	s.once.Do(func() {
		close(s.stop)
		<-s.done
		var rerr error
		if s.release != nil {
			if rerr = s.release(); rerr != nil {
				rerr = fmt.Errorf("VRAM sampler: release: %w", rerr)
			}
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.result = s.report
		if len(s.report.Samples) == 0 {
			s.err = errors.Join(fmt.Errorf("VRAM sampler: none of %d readings succeeded: %w", s.failed, s.lastErr), rerr)
		}
	})
	return s.result, s.err
}
