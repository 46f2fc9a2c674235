package cache_test

import (
	"github.com/horizon-runmap/horizon/runtime/cache"
	"github.com/horizon-runmap/horizon/runtime/engine"
)

// The cache is what the engine acquires routed groups from.
var _ engine.ExpertRows = (*cache.Cache)(nil)
