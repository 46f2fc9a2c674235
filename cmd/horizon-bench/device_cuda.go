//go:build cuda

package main

import (
	"errors"

	"github.com/horizon-runmap/horizon/runtime/cuda"
)

// In cuda-tagged builds --device cuda opens GPU 0: the compute backend and,
// on the same context, the cache device that holds expert rows.
func init() {
	openCUDA = func() (*device, error) {
		be, err := cuda.Open(0)
		if err != nil {
			return nil, err
		}
		return &device{Backend: be, Rows: be.Rows(), close: func() error {
			return errors.Join(be.Synchronize(), be.Close())
		}}, nil
	}
}
