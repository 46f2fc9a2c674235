package engine

import "github.com/horizon-runmap/horizon/runtime/device"

// ExpertRows is defined in runtime/device: the one protocol (Snapshot,
// Lease, Serve, Release, Prefetch) through which the engine and its
// steppers reach runtime/cache's resident-qpacked-cache-v1.
type ExpertRows = device.ExpertRows
