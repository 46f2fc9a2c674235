package cache

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/horizon-runmap/horizon/eviction"
	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/device"
)

// modelConfig is one run of the model-based test.
type modelConfig struct {
	name                             string
	layers, experts, capacity, group int
	spares, staging                  int
	policy, placement                string
	transport                        string
	maxOpen                          int // leases held open at once
	steps                            int
	seed                             uint64
	recordSize                       int
}

// refLayer is the reference model of one layer: the published experts in
// eviction order and the open leases per expert. It knows nothing about
// rows. lru and fifo keep the order here, written out independently of
// package eviction; every other policy (lfu, arc) is its own eviction.Policy
// instance (pol), driven with the calls the cache must make: the model then
// checks that the cache serves, refuses, leases and orders exactly as that
// policy says.
type refLayer struct {
	order  []int
	pol    eviction.Policy
	leases map[int]int
}

// published is the layer's eviction order.
func (rl *refLayer) published() []int {
	if rl.pol != nil {
		return rl.pol.Order()
	}
	return rl.order
}

type refModel struct {
	layers     []refLayer
	capacity   int
	touchOnHit bool
}

// acquire predicts an Acquire: the victims, or ok=false when the cache must
// refuse with ErrNoVictim. It does not change the model.
func (m *refModel) acquire(l int, ids []int) (missing, victims []int, ok bool) {
	rl := &m.layers[l]
	order := rl.published()
	for _, e := range ids {
		if !slices.Contains(order, e) {
			missing = append(missing, e)
		}
	}
	need := max(0, len(missing)-(m.capacity-len(order)))
	if rl.pol != nil {
		victims = rl.pol.Victims(need, func(e int) bool { return !slices.Contains(ids, e) && rl.leases[e] == 0 })
		return missing, victims, len(victims) == need
	}
	for _, e := range order {
		if len(victims) == need {
			break
		}
		if !slices.Contains(ids, e) && rl.leases[e] == 0 {
			victims = append(victims, e)
		}
	}
	return missing, victims, len(victims) == need
}

// commit applies a successful Acquire.
func (m *refModel) commit(l int, ids, missing, victims []int) {
	rl := &m.layers[l]
	if rl.pol != nil {
		for _, v := range victims {
			rl.pol.Remove(v)
		}
		for _, e := range ids {
			if slices.Contains(missing, e) {
				rl.pol.Insert(e)
			} else {
				rl.pol.Hit(e)
			}
			rl.leases[e]++
		}
		return
	}
	rl.order = slices.DeleteFunc(rl.order, func(e int) bool { return slices.Contains(victims, e) })
	for _, e := range ids {
		switch {
		case slices.Contains(missing, e):
			rl.order = append(rl.order, e)
		case m.touchOnHit:
			i := slices.Index(rl.order, e)
			rl.order = append(slices.Delete(rl.order, i, i+1), e)
		}
		rl.leases[e]++
	}
}

type openLease struct {
	layer   int
	ids     []int
	rows    []backend.Tensor
	release func()
}

func modelConfigs() []modelConfig {
	cs := []modelConfig{
		{name: "lru-E8-c4-k2", layers: 2, experts: 8, capacity: 4, group: 2, spares: 2, staging: 1, maxOpen: 3, steps: 500},
		{name: "lru-E16-c6-k4-strided", layers: 2, experts: 16, capacity: 6, group: 4, spares: 5, staging: 2, placement: "strided", maxOpen: 2, steps: 500},
		{name: "lru-tight-E6-c2-k2", layers: 1, experts: 6, capacity: 2, group: 2, spares: 2, staging: 1, maxOpen: 1, steps: 300},
		{name: "fifo-E12-c5-k3", layers: 2, experts: 12, capacity: 5, group: 3, spares: 3, staging: 3, policy: "fifo", maxOpen: 3, steps: 500},
		{name: "lfu-E12-c5-k3", layers: 2, experts: 12, capacity: 5, group: 3, spares: 3, staging: 3, policy: "lfu", maxOpen: 3, steps: 500},
		{name: "arc-E12-c5-k3", layers: 2, experts: 12, capacity: 5, group: 3, spares: 3, staging: 3, policy: "arc", maxOpen: 3, steps: 500},
		{name: "arc-E16-c6-k4-strided", layers: 2, experts: 16, capacity: 6, group: 4, spares: 5, staging: 2, placement: "strided", policy: "arc", maxOpen: 2, steps: 500},
		{name: "lru-full-E8-c8-k4", layers: 1, experts: 8, capacity: 8, group: 4, spares: 4, staging: 1, maxOpen: 3, steps: 200},
		{name: "lru-E4-c1-k1", layers: 1, experts: 4, capacity: 1, group: 1, spares: 1, staging: 1, maxOpen: 1, steps: 200},
	}
	// Random shapes, fixed seeds.
	r := rand.New(rand.NewPCG(7, 7))
	for i := 0; i < 12; i++ {
		e := 2 + r.IntN(19)
		c := 1 + r.IntN(e)
		k := 1 + r.IntN(min(c, 4))
		cs = append(cs, modelConfig{
			name:   fmt.Sprintf("random-%d", i),
			layers: 1 + r.IntN(3), experts: e, capacity: c, group: k,
			spares: k + r.IntN(3), staging: 1 + r.IntN(3),
			policy:    eviction.Policies()[r.IntN(len(eviction.Policies()))],
			placement: []string{"canonical", "strided"}[r.IntN(2)],
			maxOpen:   r.IntN(4), steps: 300,
		})
	}
	for i := range cs {
		cs[i].seed = uint64(i + 1)
		if cs[i].recordSize == 0 {
			cs[i].recordSize = 200 + 37*i // odd sizes: nothing assumes alignment
		}
		if cs[i].policy == "" {
			cs[i].policy = "lru"
		}
		cs[i].transport = TransportStaged
	}
	// Every shape again with the registered transport (no staging ring).
	for _, mc := range cs[:len(cs):len(cs)] {
		mc.name += "-registered"
		mc.transport, mc.staging = TransportRegistered, 0
		cs = append(cs, mc)
	}
	return cs
}

// TestModel drives random routed groups, lease holding and out-of-order
// releases against a reference model and checks the cache after every step.
func TestModel(t *testing.T) {
	for _, mc := range modelConfigs() {
		t.Run(mc.name, func(t *testing.T) {
			t.Parallel()
			runModel(t, mc)
		})
	}
}

func runModel(t *testing.T, mc modelConfig) {
	auth := newFakeAuthority(t, mc.layers, mc.experts, mc.recordSize)
	dev := newCPUDevice(t)
	c, err := New(dev, auth, mc.layers, mc.experts, Options{
		Capacity: mc.capacity, Spares: mc.spares, Staging: mc.staging, GroupSize: mc.group,
		Policy: mc.policy, Placement: mc.placement, Transport: mc.transport,
	})
	if err != nil {
		t.Fatal(err)
	}
	c.Admit()
	prep := c.Preparation()
	authBytes := int64(mc.layers * mc.experts * mc.recordSize)
	switch {
	case mc.transport == TransportStaged && (prep.StagingBytes != prep.H2DBytes || prep.HostRegisteredBytes != 0 || len(c.ring.slots) != mc.staging):
		t.Fatalf("staged: preparation %+v with %d staging buffers", prep, len(c.ring.slots))
	case mc.transport == TransportRegistered && (prep.StagingBytes != 0 || prep.HostRegisteredBytes != authBytes || len(c.ring.slots) != 0):
		t.Fatalf("registered: preparation %+v with %d staging buffers, want the %d-byte authority registered and no staging", prep, len(c.ring.slots), authBytes)
	}
	placed, _ := InitialPlacement(mc.placement, mc.experts, mc.capacity)
	m := &refModel{capacity: mc.capacity, touchOnHit: mc.policy == "lru"}
	for range mc.layers {
		rl := refLayer{order: slices.Clone(placed), leases: map[int]int{}}
		if mc.policy != "lru" && mc.policy != "fifo" {
			pol, err := eviction.NewPolicy(mc.policy, mc.experts)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range placed {
				pol.Insert(e)
			}
			rl.order, rl.pol = nil, pol
		}
		m.layers = append(m.layers, rl)
	}
	r := rand.New(rand.NewPCG(mc.seed, 99))
	var (
		open                 []openLease
		requested, misses    int64
		lastLayer            = -1
		lastGroup            []int
		refused, maxObserved int
	)
	for step := 0; step < mc.steps; step++ {
		if len(open) > 0 && r.IntN(3) == 0 {
			// Release a random open lease: out of order.
			i := r.IntN(len(open))
			ol := open[i]
			for j, e := range ol.ids {
				checkRow(t, auth, ol.rows[j], ol.layer, e) // still intact at release
				m.layers[ol.layer].leases[e]--
			}
			ol.release()
			ol.release() // idempotent
			open = slices.Delete(open, i, i+1)
		} else {
			l := r.IntN(mc.layers)
			ids := randomGroup(r, mc.experts, 1+r.IntN(mc.group))
			missing, victims, ok := m.acquire(l, ids)
			before, seq := c.Resident(l)
			orderBefore := policyOrder(c, l)
			cntBefore := c.Counters()
			rows, release, err := device.Acquire(c, l, ids)
			if !ok {
				if !errors.Is(err, ErrNoVictim) {
					t.Fatalf("step %d: Acquire(%d, %v) = %v, the model expects ErrNoVictim", step, l, ids, err)
				}
				after, seq2 := c.Resident(l)
				if !slices.Equal(before, after) || seq != seq2 || !slices.Equal(orderBefore, policyOrder(c, l)) {
					t.Fatalf("step %d: refused acquire changed the layer", step)
				}
				if d := c.Counters().Sub(cntBefore); d.Hits+d.Misses+d.H2DCopies+d.Evictions != 0 {
					t.Fatalf("step %d: refused acquire counted %+v", step, d)
				}
				refused++
			} else {
				if err != nil {
					t.Fatalf("step %d: Acquire(%d, %v): %v", step, l, ids, err)
				}
				after, _ := c.Resident(l)
				var evicted []int
				for _, e := range before {
					if !slices.Contains(after, e) {
						evicted = append(evicted, e)
					}
				}
				if want := slices.Sorted(slices.Values(victims)); !slices.Equal(evicted, want) {
					t.Fatalf("step %d: group %v evicted %v, the %s model evicts %v (order before %v)", step, ids, evicted, mc.policy, want, orderBefore)
				}
				m.commit(l, ids, missing, victims)
				requested += int64(len(ids))
				misses += int64(len(missing))
				lastLayer, lastGroup = l, ids
				for j, e := range ids {
					checkRow(t, auth, rows[j], l, e)
				}
				if len(open) < mc.maxOpen && r.IntN(2) == 0 {
					open = append(open, openLease{layer: l, ids: ids, rows: rows, release: release})
				} else {
					for _, e := range ids {
						m.layers[l].leases[e]--
					}
					release()
				}
			}
		}
		maxObserved = max(maxObserved, len(open))
		checkModel(t, step, c, auth, m, open, lastLayer, lastGroup)
		d := c.Counters().Sub(c.Preparation())
		if d.Hits+d.Misses != requested || d.Misses != misses {
			t.Fatalf("step %d: hits %d + misses %d, want %d requested with %d misses", step, d.Hits, d.Misses, requested, misses)
		}
		if d.H2DBytes != d.Misses*int64(mc.recordSize) || d.H2DCopies != d.Misses {
			t.Fatalf("step %d: h2d %d bytes in %d copies for %d misses of %d bytes", step, d.H2DBytes, d.H2DCopies, d.Misses, mc.recordSize)
		}
		if wantStaging := map[string]int64{TransportStaged: d.H2DBytes, TransportRegistered: 0}[mc.transport]; d.StagingBytes != wantStaging || d.HostRegisteredBytes != 0 {
			t.Fatalf("step %d: %s transport: %d staging bytes for %d h2d bytes, %d registered", step, mc.transport, d.StagingBytes, d.H2DBytes, d.HostRegisteredBytes)
		}
		// The initial placement fills every published row, so there is no
		// free capacity and every miss evicts.
		if d.Evictions != d.Misses {
			t.Fatalf("step %d: %d evictions for %d misses with no free capacity", step, d.Evictions, d.Misses)
		}
		var sum int64
		for i := range d.LayerMisses {
			sum += d.LayerHits[i] + d.LayerMisses[i]
		}
		if sum != requested || d.D2HExpertBytes+d.Writebacks+d.AuthorityWrites+d.RequestHashBytes+d.RequestArtifactReads != 0 {
			t.Fatalf("step %d: counters do not add up: %+v", step, d)
		}
	}
	for _, ol := range open {
		ol.release()
	}
	if mc.maxOpen > 0 && maxObserved == 0 {
		t.Errorf("never held a lease open")
	}
	t.Logf("%d requested, %d misses, %d refused", requested, misses, refused)
	if got, want := dev.regs.Len(), map[string]int{TransportStaged: 0, TransportRegistered: 1}[mc.transport]; got != want {
		t.Fatalf("%d host ranges registered before Close, want %d", got, want)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if dev.regs.Len() != 0 || auth.pins.Load() != 0 {
		t.Fatalf("after Close: %d host ranges registered, authority pinned %d times", dev.regs.Len(), auth.pins.Load())
	}
}

// randomGroup draws n distinct experts, favouring low ids so groups hit.
func randomGroup(r *rand.Rand, experts, n int) []int {
	var ids []int
	for len(ids) < n {
		e := r.IntN(experts)
		if r.IntN(2) == 0 {
			e = r.IntN(max(1, experts/2))
		}
		if !slices.Contains(ids, e) {
			ids = append(ids, e)
		}
	}
	return ids
}

// checkModel checks the cache's state against the model after a step.
func checkModel(t *testing.T, step int, c *Cache, auth *Authority, m *refModel, open []openLease, lastLayer int, lastGroup []int) {
	t.Helper()
	for li, rl := range m.layers {
		res, _ := c.Resident(li)
		if len(res) != c.opts.Capacity {
			t.Fatalf("step %d layer %d: %d experts published, capacity %d", step, li, len(res), c.opts.Capacity)
		}
		if want := slices.Sorted(slices.Values(rl.published())); !slices.Equal(res, want) {
			t.Fatalf("step %d layer %d: published %v, model %v", step, li, res, want)
		}
		if got := policyOrder(c, li); !slices.Equal(got, rl.published()) {
			t.Fatalf("step %d layer %d: eviction order %v, model %v", step, li, got, rl.published())
		}
		if li == lastLayer {
			for _, e := range lastGroup {
				if !slices.Contains(res, e) {
					t.Fatalf("step %d layer %d: expert %d of the last group %v not published", step, li, e, lastGroup)
				}
			}
		}
		checkRows(t, step, c, li, rl)
	}
	for _, ol := range open {
		for j, e := range ol.ids {
			checkRow(t, auth, ol.rows[j], ol.layer, e)
		}
	}
}

// checkRows checks the physical rows of a layer: the generation maps
// distinct published rows holding their experts; lease counts match the
// model; no leased row is spare, loading or quarantined.
func checkRows(t *testing.T, step int, c *Cache, li int, rl refLayer) {
	t.Helper()
	l := c.layers[li]
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.gen.Load()
	seen := map[int32]bool{}
	for e, r := range g.rowOf {
		if r < 0 {
			continue
		}
		if seen[r] {
			t.Fatalf("step %d layer %d: row %d published twice", step, li, r)
		}
		seen[r] = true
		if row := l.rows[r]; row.state != rowPublished || row.expert != e {
			t.Fatalf("step %d layer %d: expert %d maps to row %d in state %v holding %d", step, li, e, r, row.state, row.expert)
		}
		if row := l.rows[r]; row.leases != rl.leases[e] {
			t.Fatalf("step %d layer %d: expert %d has %d leases, model %d", step, li, e, row.leases, rl.leases[e])
		}
	}
	published := 0
	for ri, row := range l.rows {
		if row.owner == poolOwner {
			// the shared pool: spare, unleased, holding nothing
			if row.state != rowSpare || row.leases != 0 || row.expert != -1 || row.read != nil {
				t.Fatalf("step %d: pool row %d in state %v with %d leases, expert %d", step, ri, row.state, row.leases, row.expert)
			}
			continue
		}
		if row.owner != li {
			continue
		}
		if row.state == rowSpare {
			t.Fatalf("step %d layer %d: row %d is spare outside the pool", step, li, ri)
		}
		if row.state == rowPublished {
			published++
		}
		if row.leases < 0 || row.leases > 0 && row.state != rowPublished && row.state != rowRetired {
			t.Fatalf("step %d layer %d: row %d in state %v has %d leases", step, li, ri, row.state, row.leases)
		}
		if row.state == rowLoading || row.state == rowQuarantined {
			t.Fatalf("step %d layer %d: row %d left %v", step, li, ri, row.state)
		}
	}
	if published != c.opts.Capacity {
		t.Fatalf("step %d layer %d: %d rows published", step, li, published)
	}
}
