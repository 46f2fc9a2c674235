//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"slices"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"gorgonia.org/cu"
)

// MeasureH2D measures pinned host-to-device bandwidth in GB/s (1e9 bytes
// per second): it allocates a pinned host buffer and a device buffer of
// bytes each, copies once to warm up, then times reps copies of the whole
// buffer on the copy stream with CUDA events (one between consecutive
// copies) and divides bytes by the median copy time. Both buffers are
// freed before it returns. It waits for every queued op of the copy stream
// and holds the owner thread for the whole measurement (~5 ms per copy of
// 256 MiB on an H200).
func (b *Backend) MeasureH2D(bytes, reps int) (gbps float64, err error) {
	if bytes <= 0 || reps <= 0 {
		return 0, fmt.Errorf("cuda: MeasureH2D(%d bytes, %d reps): both must be positive", bytes, reps)
	}
	var ms float64
	if err := b.o.do(func() (err error) { ms, err = b.timeH2D(bytes, reps); return err }); err != nil {
		return 0, fmt.Errorf("cuda: measure H2D bandwidth with %d-byte copies x %d: %w", bytes, reps, err)
	}
	if ms <= 0 {
		return 0, fmt.Errorf("cuda: measure H2D bandwidth with %d-byte copies x %d: median copy time %g ms is below the event resolution", bytes, reps, ms)
	}
	return float64(bytes) / (ms * 1e-3) / 1e9, nil
}

// timeH2D is MeasureH2D's work on the owner thread: the median time of one
// copy in milliseconds.
func (b *Backend) timeH2D(bytes, reps int) (median float64, err error) {
	host, err := newPinned(bytes)
	if err != nil {
		return 0, fmt.Errorf("pinned host buffer: %w", err)
	}
	defer func() { err = errors.Join(err, host.free()) }() // runs last: after the copies finished
	dst, err := cu.MemAlloc(int64(bytes))
	if err != nil {
		return 0, fmt.Errorf("device buffer: %w", err)
	}
	events := make([]cu.Event, 0, reps+1)
	defer func() {
		errs := []error{err}
		if serr := b.copy.Synchronize(); serr != nil {
			errs = append(errs, fmt.Errorf("copy stream: %w", serr))
		}
		for i := range events {
			errs = append(errs, cu.DestroyEvent(&events[i]))
		}
		errs = append(errs, cu.MemFree(dst))
		err = errors.Join(errs...)
	}()
	if err := cu.MemcpyHtoDAsync(dst, host.p, int64(bytes), b.copy); err != nil {
		return 0, fmt.Errorf("warm-up copy: %w", err)
	}
	if err := b.copy.Synchronize(); err != nil {
		return 0, fmt.Errorf("warm-up copy: %w", err)
	}
	for range reps + 1 {
		ev, err := cu.MakeEvent(cu.DefaultEvent) // timing enabled
		if err != nil {
			return 0, fmt.Errorf("timing event: %w", err)
		}
		events = append(events, ev)
	}
	if err := events[0].Record(b.copy); err != nil {
		return 0, fmt.Errorf("record event: %w", err)
	}
	for i := range reps {
		if err := cu.MemcpyHtoDAsync(dst, host.p, int64(bytes), b.copy); err != nil {
			return 0, fmt.Errorf("copy %d: %w", i+1, err)
		}
		if err := events[i+1].Record(b.copy); err != nil {
			return 0, fmt.Errorf("record event: %w", err)
		}
	}
	if err := events[reps].Synchronize(); err != nil {
		return 0, fmt.Errorf("wait for the copies: %w", err)
	}
	times := make([]float64, reps)
	for i := range times {
		if times[i], err = events[i].Elapsed(events[i+1]); err != nil {
			return 0, fmt.Errorf("elapsed time of copy %d: %w", i+1, err)
		}
	}
	slices.Sort(times)
	if reps%2 == 1 {
		return times[reps/2], nil
	}
	return (times[reps/2-1] + times[reps/2]) / 2, nil
}

// DeviceInfo names the GPU (e.g. "NVIDIA H200") and its driver. The driver
// is NVML's system driver version (e.g. "580.159"), the number nvidia-smi
// shows and people compare; when NVML is unavailable it is the CUDA driver
// API version as "CUDA 13.0". err is set only when neither is available
// (driver is then ""); name is always set.
func (b *Backend) DeviceInfo() (name, driver string, err error) {
	name = b.name
	v, nerr := nvmlDriverVersion()
	if nerr == nil {
		return name, v, nil
	}
	cv := -1
	if err := b.o.do(func() error { cv = cu.Version(); return nil }); err != nil {
		return name, "", fmt.Errorf("cuda: driver version: %w; cuDriverGetVersion: %w", nerr, err)
	}
	if cv <= 0 {
		return name, "", fmt.Errorf("cuda: driver version: %w; cuDriverGetVersion failed", nerr)
	}
	return name, fmt.Sprintf("CUDA %d.%d", cv/1000, cv%1000/10), nil
}

// nvmlDriverVersion is the system's NVIDIA driver version from NVML.
// NVML's init and shutdown are reference counted, so this is safe while
// another NVML user (observe's VRAM sampler) is running. A failed shutdown
// does not make the version read before it wrong, so it is not an error.
func nvmlDriverVersion() (string, error) {
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		return "", fmt.Errorf("nvml init: %s", nvml.ErrorString(ret))
	}
	defer nvml.Shutdown()
	v, ret := nvml.SystemGetDriverVersion()
	if ret != nvml.SUCCESS {
		return "", fmt.Errorf("nvml driver version: %s", nvml.ErrorString(ret))
	}
	return v, nil
}
