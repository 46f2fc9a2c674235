package engine

import "github.com/horizon-runmap/horizon/runtime/device"

// ExpertRows is defined in runtime/device: the routed group's rows, served
// by runtime/cache's resident-qpacked-cache-v1.
type ExpertRows = device.ExpertRows
