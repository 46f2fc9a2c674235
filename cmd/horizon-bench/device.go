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
