//go:build cuda

package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/horizon-runmap/horizon/runtime/cuda"
)

// The H2D bandwidth probe copies h2dProbeBytes (256 MiB) from pinned host
// memory h2dProbeReps times and takes the median (GPU-NOTES: ~55 GB/s on the
// H200 at this size; 4 MiB copies give ~53).
const (
	h2dProbeBytes = 256 << 20
	h2dProbeReps  = 5
)

// In cuda-tagged builds --device cuda opens GPU 0: the compute backend and,
// on the same context, the cache device that holds expert rows. Opening it
// also sets the observation hooks of worker.go, so a cpu worker of a cuda
// build keeps them nil and records those observations as UNSUPPORTED.
func init() {
	openCUDA = func() (*device, error) {
		be, err := cuda.Open(0)
		if err != nil {
			return nil, err
		}
		h2dBandwidth, gpuInfo = cudaH2DBandwidth, cudaGPUInfo
		return &device{Backend: be, Rows: be.Rows(), close: func() error {
			return errors.Join(be.Synchronize(), be.Close())
		}}, nil
	}
}

// cudaH2DBandwidth is the h2dBandwidth hook: pinned host-to-device bytes per
// second on d. An error leaves the observation UNKNOWN; it is also written
// to stderr, since the record keeps no reason.
func cudaH2DBandwidth(d *device) (float64, error) {
	be, err := cudaBackend(d)
	if err == nil {
		var gbps float64
		if gbps, err = be.MeasureH2D(h2dProbeBytes, h2dProbeReps); err == nil {
			return gbps * 1e9, nil
		}
	}
	fmt.Fprintf(os.Stderr, "worker: H2D bandwidth will be UNKNOWN: %v\n", err)
	return 0, err
}

// cudaGPUInfo is the gpuInfo hook: the GPU's name and driver version on d
// ("" for what could not be read, which the record shows as UNKNOWN).
func cudaGPUInfo(d *device) (name, driver string) {
	be, err := cudaBackend(d)
	if err == nil {
		if name, driver, err = be.DeviceInfo(); err == nil {
			return name, driver
		}
	}
	fmt.Fprintf(os.Stderr, "worker: GPU name or driver version will be UNKNOWN: %v\n", err)
	return name, driver
}

func cudaBackend(d *device) (*cuda.Backend, error) {
	be, ok := d.Backend.(*cuda.Backend)
	if !ok {
		return nil, fmt.Errorf("device backend is %T, not the cuda backend", d.Backend)
	}
	return be, nil
}
