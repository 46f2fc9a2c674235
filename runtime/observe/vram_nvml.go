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
// device is a CUDA ordinal; NVML numbers every GPU of the machine, so the
// GPU sampled is the one CUDA_VISIBLE_DEVICES maps that ordinal to
// (visibleDevice).
func StartVRAM(device int, interval time.Duration) (VRAMSampler, error) {
	index, uuid, err := visibleDevice(os.Getenv("CUDA_VISIBLE_DEVICES"), device)
	if err != nil {
		return nil, fmt.Errorf("nvml: %w", err)
	}
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("nvml init: %s: %w", nvml.ErrorString(ret), ErrUnsupported)
	}
	shutdown := func() error {
		if ret := nvml.Shutdown(); ret != nvml.SUCCESS {
			return fmt.Errorf("nvml shutdown: %s", nvml.ErrorString(ret))
		}
		return nil
	}
	var dev nvml.Device
	var ret nvml.Return
	if uuid != "" {
		dev, ret = nvml.DeviceGetHandleByUUID(uuid)
	} else {
		dev, ret = nvml.DeviceGetHandleByIndex(index)
	}
	if ret != nvml.SUCCESS {
		return nil, errors.Join(fmt.Errorf("nvml device %d (index %d %s): %s", device, index, uuid, nvml.ErrorString(ret)), shutdown())
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
