package main

import (
	"fmt"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/cache"
	"github.com/horizon-runmap/horizon/runtime/cpu"
)

// device is a compute backend with the cache device its expert rows live on.
type device struct {
	backend.Backend
	Rows  cache.Device
	close func() error
}

// Close stops the device's streams.
func (d *device) Close() error { return d.close() }

// openDevice returns the compute backend named by --device.
func openDevice(name string, threads int) (*device, error) {
	switch name {
	case "cpu":
		be := cpu.New(threads)
		rows := cache.NewCPUDevice(be)
		return &device{Backend: be, Rows: rows, close: rows.Close}, nil
	case "cuda":
		return openCUDA()
	default:
		return nil, usageError("--device %q: want cpu or cuda", name)
	}
}

// openCUDA is replaced in cuda-tagged builds.
var openCUDA = func() (*device, error) {
	return nil, fmt.Errorf("--device cuda: this horizon-bench was built without CUDA support; build it with `make cuda` (needs the CUDA headers, which the Makefile installs) and run it on a machine with an NVIDIA GPU")
}
