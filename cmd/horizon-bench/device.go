package main

import (
	"fmt"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/cpu"
)

// openBackend returns the compute backend named by --device.
func openBackend(device string, threads int) (backend.Backend, error) {
	switch device {
	case "cpu":
		return cpu.New(threads), nil
	case "cuda":
		return openCUDA()
	default:
		return nil, usageError("--device %q: want cpu or cuda", device)
	}
}

// openCUDA is replaced in cuda-tagged builds.
var openCUDA = func() (backend.Backend, error) {
	return nil, fmt.Errorf("--device cuda: this horizon-bench was built without CUDA support; build it with `make cuda` (needs the CUDA headers, which the Makefile installs) and run it on a machine with an NVIDIA GPU")
}
