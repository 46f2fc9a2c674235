package observe

import "time"

// VRAMSample is one reading of device memory.
type VRAMSample struct {
	AtNs        int64 // ns since the sampler started
	DeviceUsed  int64 // device-wide used bytes (driver view)
	ProcessUsed int64 // this process's bytes; -1 when the driver did not say
}

// VRAMReport summarises a sampler's run.
type VRAMReport struct {
	DevicePeak  int64 // max DeviceUsed
	ProcessPeak int64 // max ProcessUsed; -1 when never observed
	Samples     []VRAMSample
}

// VRAMSampler samples device memory on a goroutine until stopped.
type VRAMSampler interface {
	// Stop ends sampling (taking one last sample) and reports.
	Stop() (VRAMReport, error)
}

// DefaultVRAMInterval is the sampling period: fine enough to see a
// worker's allocation phases, coarse enough to cost nothing measurable.
const DefaultVRAMInterval = 20 * time.Millisecond
