//go:build cuda

package cuda

import (
	"fmt"

	"gorgonia.org/cu"

	"github.com/horizon-runmap/horizon/runtime/backend"
)

var _ backend.Viewer = (*Backend)(nil)

// View implements backend.Viewer: elements [off, off+n) of t, sharing its
// device memory. Views are not freed on their own (Free refuses them); they
// die with their parent. off must keep 16-byte alignment, which the row
// kernels' vector loads need.
func (b *Backend) View(t backend.Tensor, off, n int) (backend.Tensor, error) {
	p, err := b.tensorOf("View", "t", t, backend.F32, backend.F16, backend.Bytes)
	if err != nil {
		return nil, err
	}
	if off < 0 || n < 0 || off+n > p.n {
		return nil, shapeErr("View", "[%d, %d) outside %d values", off, off+n, p.n)
	}
	es := elemSize(p.dt)
	if off*es%16 != 0 {
		return nil, fmt.Errorf("cuda: View: offset %d (%d bytes) is not 16-byte aligned", off, off*es)
	}
	return &Tensor{ptr: p.ptr + cu.DevicePtr(off*es), n: n, dt: p.dt, bytes: n * es, b: b, view: true}, nil
}
