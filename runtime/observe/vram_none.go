//go:build !cuda

package observe

import (
	"fmt"
	"time"
)

// StartVRAM reports ErrUnsupported: builds without the cuda tag have no NVML.
func StartVRAM(device int, interval time.Duration) (VRAMSampler, error) {
	return nil, fmt.Errorf("VRAM sampling needs a cuda build: %w", ErrUnsupported)
}
