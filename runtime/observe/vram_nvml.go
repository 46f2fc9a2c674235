//go:build cuda

package observe

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// StartVRAM starts sampling GPU index device through NVML every interval:
// device-wide used memory (nvmlDeviceGetMemoryInfo) and this process's
// memory (its entries in nvmlDeviceGetComputeRunningProcesses, matched by
// os.Getpid; -1 in a sample where it is not listed, e.g. when a container
// hides host PIDs). Stop gives the peaks and the timeline.
//
// NVML numbers GPUs its own way, not by CUDA_VISIBLE_DEVICES: index 0 is
// the CUDA device 0 only on a one-GPU machine or with the PCI bus order.
func StartVRAM(device int, interval time.Duration) (VRAMSampler, error) {
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("nvml init: %s: %w", nvml.ErrorString(ret), ErrUnsupported)
	}
	shutdown := func() error {
		if ret := nvml.Shutdown(); ret != nvml.SUCCESS {
			return fmt.Errorf("nvml shutdown: %s", nvml.ErrorString(ret))
		}
		return nil
	}
	dev, ret := nvml.DeviceGetHandleByIndex(device)
	if ret != nvml.SUCCESS {
		return nil, errors.Join(fmt.Errorf("nvml device %d: %s", device, nvml.ErrorString(ret)), shutdown())
	}
	pid := os.Getpid()
	var procs []procMem
	read := func() (int64, int64, error) {
		mem, ret := dev.GetMemoryInfo()
		if ret != nvml.SUCCESS {
			return 0, 0, fmt.Errorf("nvml memory info of device %d: %s", device, nvml.ErrorString(ret))
		}
		proc := int64(-1)
		if list, ret := dev.GetComputeRunningProcesses(); ret == nvml.SUCCESS {
			procs = procs[:0]
			for _, p := range list {
				procs = append(procs, procMem{Pid: p.Pid, Used: p.UsedGpuMemory})
			}
			proc = processBytes(procs, pid)
		}
		return int64(mem.Used), proc, nil
	}
	s, err := startPolling(read, interval, shutdown)
	if err != nil {
		return nil, errors.Join(err, shutdown())
	}
	return s, nil
}
