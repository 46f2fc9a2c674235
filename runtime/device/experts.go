package device

import "github.com/horizon-runmap/horizon/runtime/backend"

// ExpertRows hands the engine the backend rows that hold a routed group.
// runtime/cache's resident-qpacked-cache-v1 implements it.
type ExpertRows interface {
	// Acquire returns, for each id, the row holding that expert of the layer,
	// and a release function the caller invokes once the compute that read
	// the rows has been issued; the cache reuses a row only after that
	// compute completed.
	Acquire(layer int, ids []int) (rows []backend.Tensor, release func(), err error)
}
