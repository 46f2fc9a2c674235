//go:build cuda

package cuda

import (
	"errors"

	"github.com/horizon-runmap/horizon/runtime/device"
)

// The H2D bandwidth probe copies h2dProbeBytes (256 MiB) from pinned host
// memory h2dProbeReps times and takes the median (GPU-NOTES: ~55 GB/s on the
// H200 at this size; 4 MiB copies give ~53).
const (
	h2dProbeBytes = 256 << 20
	h2dProbeReps  = 5
)

// A cuda-tagged build can open "cuda" by name (device.Open): the compute
// backend on GPU o.Ordinal and, on the same context, the rows device that
// holds expert rows, with the bandwidth probe and the GPU's name.
func init() {
	device.Register("cuda", func(o device.Options) (*device.Opened, error) {
		b, err := Open(o.Ordinal)
		if err != nil {
			return nil, err
		}
		return &device.Opened{
			Backend: b, Rows: b.ExpertRows(),
			MeasureH2D: func() (float64, error) {
				gbps, err := b.MeasureH2D(h2dProbeBytes, h2dProbeReps)
				return gbps * 1e9, err
			},
			Info:  b.DeviceInfo,
			Close: func() error { return errors.Join(b.Synchronize(), b.Close()) },
		}, nil
	})
}
