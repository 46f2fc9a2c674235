package main

import (
	"errors"
	"fmt"

	"github.com/horizon-runmap/horizon/runtime/cache"
	"github.com/horizon-runmap/horizon/runtime/cpu"
	"github.com/horizon-runmap/horizon/runtime/device"
)

// The cpu device is registered here: its rows device (cache.CPUDevice)
// lives in the cache package, which the CPU backend does not import. The
// cuda device registers itself in cuda-tagged builds (device_cuda.go
// imports runtime/cuda for that).
func init() {
	device.Register("cpu", func(o device.Options) (*device.Opened, error) {
		be := cpu.New(o.Threads)
		rows := cache.NewCPUDevice(be)
		return &device.Opened{Backend: be, Rows: rows, Close: rows.Close}, nil
	})
}

// openDevice opens the device named by --device (or a campaign's device)
// through runtime/device.
func openDevice(name string, threads int) (*device.Opened, error) {
	switch name {
	case "cpu", "cuda":
	default:
		return nil, usageError("--device %q: want cpu or cuda", name)
	}
	d, err := device.Open(name, device.Options{Threads: threads})
	if errors.Is(err, device.ErrUnknownDevice) && name == "cuda" {
		return nil, fmt.Errorf("--device cuda: this horizon-bench was built without CUDA support; build it with `make cuda` (needs the CUDA headers, which the Makefile installs) and run it on a machine with an NVIDIA GPU")
	}
	return d, err
}

// cpuDefaultHint is the line generate prints when it runs on the CPU only
// because --device was left at its default in a build that has CUDA: a
// full-shape model decodes at a few tokens a second there, and nothing
// else would say why. Empty otherwise.
func cpuDefaultHint(deviceSet bool, name string, cudaBuilt bool) string {
	if deviceSet || name != "cpu" || !cudaBuilt {
		return ""
	}
	return "generate: running on the CPU (--device cpu, the default); this build has CUDA: add --device cuda for the GPU"
}
