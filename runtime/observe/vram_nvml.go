//go:build cuda

package observe

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

type nvmlSampler struct {
	dev     nvml.Device
	start   time.Time
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	report  VRAMReport
	lastErr error
}

// StartVRAM starts sampling device-wide used memory and this process's
// memory on GPU index device through NVML every interval.
func StartVRAM(device int, interval time.Duration) (VRAMSampler, error) {
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("nvml init: %s: %w", nvml.ErrorString(ret), ErrUnsupported)
	}
	dev, ret := nvml.DeviceGetHandleByIndex(device)
	if ret != nvml.SUCCESS {
		nvml.Shutdown()
		return nil, fmt.Errorf("nvml device %d: %s", device, nvml.ErrorString(ret))
	}
	s := &nvmlSampler{dev: dev, start: time.Now(), stop: make(chan struct{}), done: make(chan struct{}),
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

func (s *nvmlSampler) sample() {
	mem, ret := s.dev.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		s.mu.Lock()
		s.lastErr = fmt.Errorf("nvml memory info: %s", nvml.ErrorString(ret))
		s.mu.Unlock()
		return
	}
	proc := int64(-1)
	if procs, ret := s.dev.GetComputeRunningProcesses(); ret == nvml.SUCCESS {
		for _, p := range procs {
			if int(p.Pid) == os.Getpid() {
				proc = int64(p.UsedGpuMemory)
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	smp := VRAMSample{AtNs: time.Since(s.start).Nanoseconds(), DeviceUsed: int64(mem.Used), ProcessUsed: proc}
	s.report.Samples = append(s.report.Samples, smp)
	s.report.DevicePeak = max(s.report.DevicePeak, smp.DeviceUsed)
	s.report.ProcessPeak = max(s.report.ProcessPeak, smp.ProcessUsed)
}

func (s *nvmlSampler) Stop() (VRAMReport, error) {
	close(s.stop)
	<-s.done
	nvml.Shutdown()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.report.Samples) == 0 {
		return s.report, fmt.Errorf("no VRAM sample succeeded: %v", s.lastErr)
	}
	return s.report, nil
}
