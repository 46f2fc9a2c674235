package cpu

import (
	"fmt"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// The CPU's backend.DeviceRouting: the reference for the engine's
// device-routed prefill. The CPU has no device to keep a routing on, so
// RouteRows computes it at once (TopKRows) and packs its pairs by expert
// in host memory, and the ops are ExpertMatMulGroup and CombineRows over
// the packed pairs. It exists so that the engine's path (routed ops with no
// read back, the leases counted after the batch) runs in the engine tests
// on every machine; it is off unless SetDeviceRouting turns it on.

// SetDeviceRouting turns the device-routed prefill on or off (off by
// default: the CPU gains nothing from it).
func (b *Backend) SetDeviceRouting(on bool) { b.devRoute = on }

// RoutesOnDevice implements backend.DeviceRouting.
func (b *Backend) RoutesOnDevice(qpack.Scheme) bool { return b.devRoute }

// routing is a layer's routing packed by expert: ids and weights in slot
// order; for each routed expert (id order) its record and its pairs'
// tokens, slots and packed positions.
type routing struct {
	ids                []int
	ws                 []float32
	T, k               int
	scheme             qpack.Scheme
	recs               []backend.Tensor
	toks, slots, packd [][]int
}

// RouteRows implements backend.DeviceRouting.
func (b *Backend) RouteRows(logits backend.Tensor, T, k int, rows []backend.Tensor, lay qpack.RecordLayout) (backend.Routing, error) {
	ids, ws, err := b.TopKRows(logits, T, k, false)
	if err != nil {
		return nil, err
	}
	E := len(rows)
	r := &routing{ids: ids, ws: ws, T: T, k: k, scheme: lay.Scheme}
	by := make([][]int, E)
	for s, id := range ids {
		if id < 0 || id >= E || rows[id] == nil {
			return nil, fmt.Errorf("cpu: RouteRows: slot %d routed to expert %d of %d published", s, id, E)
		}
		by[id] = append(by[id], s)
	}
	p := 0
	for id, ss := range by {
		if len(ss) == 0 {
			continue
		}
		toks, packd := make([]int, len(ss)), make([]int, len(ss))
		for i, s := range ss {
			toks[i], packd[i] = s/k, p+i
		}
		p += len(ss)
		r.recs, r.toks, r.slots, r.packd = append(r.recs, rows[id]), append(r.toks, toks), append(r.slots, ss), append(r.packd, packd)
	}
	return r, nil
}

// RoutedMatMul implements backend.DeviceRouting.
func (b *Backend) RoutedMatMul(dst backend.Tensor, r backend.Routing, m qpack.MatrixLayout, x backend.Tensor, down bool) error {
	rt, ok := r.(*routing)
	if !ok {
		return fmt.Errorf("cpu: RoutedMatMul: not a routing of this backend (%T)", r)
	}
	if down {
		return b.ExpertMatMulGroup(dst, rt.slots, rt.recs, m, rt.scheme, x, rt.packd)
	}
	return b.ExpertMatMulGroup(dst, rt.packd, rt.recs, m, rt.scheme, x, rt.toks)
}

// RoutedGateUp implements backend.DeviceRouting: the reference, the
// gate's and up's RoutedMatMul, then SiLUMul.
func (b *Backend) RoutedGateUp(act, gate, up backend.Tensor, r backend.Routing, g, u qpack.MatrixLayout, x backend.Tensor) error {
	if err := b.RoutedMatMul(gate, r, g, x, false); err != nil {
		return err
	}
	if err := b.RoutedMatMul(up, r, u, x, false); err != nil {
		return err
	}
	return b.SiLUMul(act, gate, up)
}

// CombineRouted implements backend.DeviceRouting.
func (b *Backend) CombineRouted(dst, src backend.Tensor, r backend.Routing) error {
	rt, ok := r.(*routing)
	if !ok {
		return fmt.Errorf("cpu: CombineRouted: not a routing of this backend (%T)", r)
	}
	return b.CombineRows(dst, src, rt.ws, rt.T, rt.k)
}

// IDs implements backend.Routing.
func (r *routing) IDs() ([]int, error) { return append([]int(nil), r.ids...), nil }

// Release implements backend.Routing (nothing to free).
func (r *routing) Release() {}

var _ backend.DeviceRouting = (*Backend)(nil)
