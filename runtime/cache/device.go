package cache

import "github.com/horizon-runmap/horizon/runtime/device"

// The device interfaces the cache drives are defined in runtime/device, below
// both the cache and the backends that implement them (runtime/cuda), so
// that no backend imports the cache. These aliases keep the cache's own
// vocabulary.
type (
	Device        = device.Device
	RowsAllocator = device.RowsAllocator
	Row           = device.Row
	Staging       = device.Staging
	Event         = device.Event
	HostRanges    = device.HostRanges
)

// ErrNotRegistered is device.ErrNotRegistered.
var ErrNotRegistered = device.ErrNotRegistered
