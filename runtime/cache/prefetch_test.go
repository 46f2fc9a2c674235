package cache

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/horizon-runmap/horizon/runtime/device"
)

// TestPrefetch walks the prefetch transaction through its cases on one
// layer of 8 experts (capacity 4, canonical placement 0..3, groups of 2),
// over both transports: what it publishes and evicts, what the routed
// group's lease finds, and the counters (the Lease scores the prediction).
func TestPrefetch(t *testing.T) {
	type want struct {
		resident                      []int
		issued, loaded, used, evicted int64
		hits, misses                  int64
		groups, predicted, overlap    int64
		precision, recall             float64
	}
	cases := []struct {
		name string
		// lease: experts leased (and held) before the prefetch.
		lease     []int
		predicted []int
		routed    []int
		want      want
	}{
		{
			// Both predicted experts load; the two least recently used
			// (0, 1) make room; the routed group is all hits.
			name: "right guess", predicted: []int{5, 6}, routed: []int{5, 6},
			want: want{resident: []int{2, 3, 5, 6}, issued: 2, loaded: 2, used: 2, evicted: 2, hits: 2,
				groups: 1, predicted: 2, overlap: 2, precision: 1, recall: 1},
		},
		{
			// Half right: 5 is used; 7 misses and Acquire loads it,
			// evicting 2, the least recently used.
			name: "half right", predicted: []int{5, 6}, routed: []int{5, 7},
			want: want{resident: []int{3, 5, 6, 7}, issued: 2, loaded: 2, used: 1, evicted: 3, hits: 1, misses: 1,
				groups: 1, predicted: 2, overlap: 1, precision: 0.5, recall: 0.5},
		},
		{
			// A resident predicted expert is neither loaded nor evicted:
			// 0 heads the LRU order but is predicted, so 1 makes room.
			name: "predicted resident expert is protected", predicted: []int{0, 6}, routed: []int{0, 6},
			want: want{resident: []int{0, 2, 3, 6}, issued: 1, loaded: 1, used: 1, evicted: 1, hits: 2,
				groups: 1, predicted: 2, overlap: 2, precision: 1, recall: 1},
		},
		{
			// Leased experts are never victims: with 0 and 1 leased
			// (before the request), 2 and 3 make room.
			name: "leased experts are protected", lease: []int{0, 1}, predicted: []int{5, 6}, routed: []int{5, 6},
			want: want{resident: []int{0, 1, 5, 6}, issued: 2, loaded: 2, used: 2, evicted: 2, hits: 2,
				groups: 1, predicted: 2, overlap: 2, precision: 1, recall: 1},
		},
		{
			// Wrong guess: the routed group misses as without prefetch.
			name: "wrong guess", predicted: []int{4, 5}, routed: []int{6, 7},
			want: want{resident: []int{4, 5, 6, 7}, issued: 2, loaded: 2, used: 0, evicted: 4, misses: 2,
				groups: 1, predicted: 2, overlap: 0, precision: 0, recall: 0},
		},
		{
			// Nothing to load: no transaction, but the guess is scored.
			name: "all resident", predicted: []int{1, 2}, routed: []int{1, 3},
			want: want{resident: []int{0, 1, 2, 3}, hits: 2,
				groups: 1, predicted: 2, overlap: 1, precision: 0.5, recall: 0.5},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			forTransports(t, func(t *testing.T, tr string) {
				c, auth, _ := newFaultCache(t, 8, withTransport(Options{Capacity: 4, Spares: 2, Staging: 2, GroupSize: 2}, tr))
				if len(tc.lease) > 0 {
					_, rel := mustAcquire(t, c, auth, tc.lease...)
					defer rel()
				}
				c.BeginRequest()
				if err := c.Prefetch(0, tc.predicted); err != nil {
					t.Fatal(err)
				}
				_, rel := mustAcquire(t, c, auth, tc.routed...)
				rel()
				k, err := c.EndRequest()
				if err != nil {
					t.Fatal(err)
				}
				w := tc.want
				if res, _ := c.Resident(0); !slices.Equal(res, w.resident) {
					t.Errorf("resident %v, want %v", res, w.resident)
				}
				got := want{resident: w.resident, issued: k.PrefetchIssued, loaded: k.PrefetchLoaded, used: k.PrefetchUsed,
					evicted: k.Evictions, hits: k.Hits, misses: k.Misses,
					groups: k.PrefetchGroups, predicted: k.PrefetchPredicted, overlap: k.PrefetchOverlap}
				got.precision, _ = k.PrefetchPrecision()
				got.recall, _ = k.PrefetchRecall()
				if !reflect.DeepEqual(got, w) {
					t.Errorf("counters\n got %+v\nwant %+v", got, w)
				}
				if k.H2DCopies != k.Misses+k.PrefetchLoaded || k.H2DBytes != k.H2DCopies*faultRecord || k.PrefetchH2DBytes != k.PrefetchLoaded*faultRecord {
					t.Errorf("h2d %d copies %d bytes, prefetch %d bytes, for %d misses and %d prefetched", k.H2DCopies, k.H2DBytes, k.PrefetchH2DBytes, k.Misses, k.PrefetchLoaded)
				}
				// Every published row holds its expert.
				for _, e := range w.resident {
					if slices.Contains(tc.lease, e) {
						continue
					}
					_, rel := mustAcquire(t, c, auth, e)
					rel()
				}
			})
		})
	}
}

// TestPrefetchIsBestEffort: without victims (every other published expert
// leased) or spare rows (quarantined), a prefetch loads nothing and is no
// error; the routed group is then served by its lease as always.
func TestPrefetchIsBestEffort(t *testing.T) {
	t.Run("no victim", func(t *testing.T) {
		c, auth, _ := newFaultCache(t, 8, Options{Capacity: 2, Spares: 2, Staging: 2, GroupSize: 2})
		_, rel := mustAcquire(t, c, auth, 0, 1)
		if err := c.Prefetch(0, []int{4, 5}); err != nil {
			t.Fatal(err)
		}
		awaitPrefetch(t, c, 0, 4, 5)
		k := c.Counters()
		if k.PrefetchIssued != 2 || k.PrefetchLoaded != 0 || k.Evictions != 0 {
			t.Fatalf("issued %d loaded %d evicted %d, want 2, 0, 0", k.PrefetchIssued, k.PrefetchLoaded, k.Evictions)
		}
		rel()
		_, rel = mustAcquire(t, c, auth, 4, 5)
		rel()
	})
	t.Run("no spare row", func(t *testing.T) {
		c, auth, fd := newFaultCache(t, 8, Options{Capacity: 3, Spares: 1, Staging: 1, GroupSize: 1})
		// The one spare row is quarantined by a failed miss.
		fd.set(func(fd *faultDevice) { fd.failCopyWaitAt = fd.copies + 1 })
		if _, _, err := device.Acquire(c, 0, []int{5}); !errors.Is(err, errInjected) {
			t.Fatalf("Acquire = %v, want the injected copy failure", err)
		}
		before, _ := c.Resident(0)
		if err := c.Prefetch(0, []int{6}); err != nil {
			t.Fatal(err)
		}
		awaitPrefetch(t, c, 0, 6)
		if after, _ := c.Resident(0); !slices.Equal(after, before) {
			t.Fatalf("resident %v after a skipped prefetch, was %v", after, before)
		}
		if k := c.Counters(); k.PrefetchIssued != 1 || k.PrefetchLoaded != 0 {
			t.Fatalf("issued %d loaded %d, want 1 and 0", k.PrefetchIssued, k.PrefetchLoaded)
		}
		_, rel := mustAcquire(t, c, auth, 0) // hits go on
		rel()
	})
}

// TestPrefetchDeviceError: a prefetch copy the device cannot confirm
// leaves the generation as it was, quarantines the row, and its error
// surfaces (not as a fault) from the layer's next Lease; the cache keeps
// serving.
func TestPrefetchDeviceError(t *testing.T) {
	forTransports(t, func(t *testing.T, tr string) {
		c, auth, fd := newFaultCache(t, 8, withTransport(Options{Capacity: 4, Spares: 3, Staging: 2, GroupSize: 2}, tr))
		before := snap(c)
		fd.set(func(fd *faultDevice) { fd.failCopyWaitAt = fd.copies + 1 })
		if err := c.Prefetch(0, []int{5, 6}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Lease(0, []int{5, 6}); !errors.Is(err, errInjected) || errors.Is(err, ErrFaulted) {
			t.Fatalf("Lease = %v, want the injected error, not a fault", err)
		}
		if after := snap(c); !after.equal(before) {
			t.Fatalf("failed prefetch changed the layer:\n before %+v\n after  %+v", before, after)
		}
		if st := rowStates(c, 0); st[rowQuarantined] != 1 || st[rowLoading] != 0 {
			t.Fatalf("row states %v", st)
		}
		if ls, err := c.Lease(0, []int{5, 6}); err != nil {
			t.Fatalf("the error surfaced twice: %v", err)
		} else {
			ls.Release()
		}
		fd.set(func(fd *faultDevice) { fd.failCopyWaitAt = 0 })
		_, rel := mustAcquire(t, c, auth, 5, 6)
		rel()
	})
}

// TestPrefetchRunsBehindTheCall: Prefetch returns while its copies run;
// the experts are published only after they completed; a Snapshot does
// not wait for the transaction, a Lease of the layer does (alone or
// followed by Serve); Close waits too.
func TestPrefetchRunsBehindTheCall(t *testing.T) {
	forTransports(t, func(t *testing.T, tr string) {
		c, auth, fd := newFaultCache(t, 8, withTransport(Options{Capacity: 4, Spares: 2, Staging: 2, GroupSize: 2}, tr))
		gate, issued := make(chan struct{}), make(chan struct{}, 2)
		fd.set(func(fd *faultDevice) { fd.copyGate, fd.copyIssued = gate, issued })
		if err := c.Prefetch(0, []int{6, 7}); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			select {
			case <-issued:
			case <-time.After(10 * time.Second):
				t.Fatal("prefetch copies never issued")
			}
		}
		if res, seq := c.Resident(0); !slices.Equal(res, []int{0, 1, 2, 3}) || seq != 1 {
			t.Fatalf("published %v (generation %d) while the prefetch copies run", res, seq)
		}
		if sn, err := c.Snapshot(0); err != nil || sn.Seq != 1 || sn.Rows[6] != nil || sn.Rows[0] == nil {
			t.Fatalf("Snapshot while the prefetch copies run: %+v, %v; want generation 1 without the prefetched experts", sn, err)
		}
		routed := make(chan error, 1)
		go func() {
			ls, err := c.Lease(0, []int{6, 7})
			if err == nil {
				if res := ls.Resident(); res[0] == nil || res[1] == nil {
					err = errors.New("the lease did not find the prefetched experts published")
				}
				ls.Release()
			}
			routed <- err
		}()
		missed := make(chan error, 1)
		go func() {
			rows, rel, err := device.Acquire(c, 0, []int{6, 7})
			if err == nil {
				err = errors.Join(rowErr(t, auth, rows[0], 0, 6), rowErr(t, auth, rows[1], 0, 7))
				rel()
			}
			missed <- err
		}()
		select {
		case err := <-routed:
			t.Fatalf("Lease returned (%v) while the prefetch copies run", err)
		case err := <-missed:
			t.Fatalf("Acquire returned (%v) while the prefetch copies run", err)
		case <-time.After(50 * time.Millisecond):
		}
		close(gate)
		if err := <-routed; err != nil {
			t.Fatal(err)
		}
		if err := <-missed; err != nil {
			t.Fatal(err)
		}
		k := c.Counters()
		if k.Misses != 0 || k.PrefetchLoaded != 2 || k.PrefetchUsed != 2 {
			t.Fatalf("%d misses, %d prefetched, %d used: the lease should have found the prefetched experts", k.Misses, k.PrefetchLoaded, k.PrefetchUsed)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if err := c.Prefetch(0, []int{4, 5}); !errors.Is(err, ErrClosed) {
			t.Fatalf("Prefetch after Close = %v, want ErrClosed", err)
		}
	})
}

// TestPrefetchRejects: a predicted group is validated like a routed one.
func TestPrefetchRejects(t *testing.T) {
	c, _, _ := newFaultCache(t, 8, Options{Capacity: 4, Spares: 2, Staging: 2, GroupSize: 2})
	for name, f := range map[string]func() error{
		"layer":     func() error { return c.Prefetch(1, []int{5}) },
		"expert":    func() error { return c.Prefetch(0, []int{8}) },
		"twice":     func() error { return c.Prefetch(0, []int{5, 5}) },
		"too large": func() error { return c.Prefetch(0, []int{4, 5, 6}) },
		"empty":     func() error { return c.Prefetch(0, nil) },
		"lease": func() error {
			_, err := c.Lease(-1, []int{5})
			return err
		},
	} {
		if err := f(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if k := c.Counters(); k.PrefetchIssued != 0 || k.PrefetchGroups != 0 {
		t.Fatalf("rejected calls counted: %+v", k)
	}
}

// TestPrefetchConcurrent runs consumers that predict, prefetch, route and
// lease on several layers at once, checking every served row holds its
// expert from Serve to Release, and the counters at the end. Under
// -race a prefetch copy into a row a consumer reads would show as a race.
func TestPrefetchConcurrent(t *testing.T) {
	const (
		layers, experts, size = 3, 16, 1000
		workers, iters        = 6, 300
	)
	for _, tr := range Transports() {
		t.Run(tr, func(t *testing.T) {
			auth := newFakeAuthority(t, layers, experts, size)
			c, err := New(newCPUDevice(t), auth, layers, experts, withTransport(Options{Capacity: 7, Spares: 6, Staging: 3, GroupSize: 3}, tr))
			if err != nil {
				t.Fatal(err)
			}
			c.Admit()
			var wg sync.WaitGroup
			errc := make(chan error, workers)
			for w := range workers {
				wg.Add(1)
				go func(seed uint64) {
					defer wg.Done()
					r := rand.New(rand.NewPCG(seed, 2))
					group := func() []int { return r.Perm(experts)[:1+r.IntN(3)] }
					for range iters {
						l := r.IntN(layers)
						ids := group()
						rows, rel, err := device.Acquire(c, l, ids)
						if errors.Is(err, ErrNoVictim) || errors.Is(err, ErrNoSpare) {
							runtime.Gosched()
							continue
						}
						if err != nil {
							errc <- err
							return
						}
						if l+1 < layers {
							if err := c.Prefetch(l+1, group()); err != nil {
								rel()
								errc <- err
								return
							}
						}
						for i, e := range ids {
							if err := rowErr(t, auth, rows[i], l, e); err != nil {
								errc <- err
								break
							}
						}
						rel()
					}
				}(uint64(w))
			}
			wg.Wait()
			close(errc)
			for err := range errc {
				t.Fatal(err)
			}
			c.BeginRequest() // waits for the last prefetch
			k := c.Counters().Sub(c.Preparation())
			if k.PrefetchUsed > k.PrefetchLoaded || k.PrefetchLoaded > k.PrefetchIssued || k.PrefetchLoaded == 0 {
				t.Fatalf("prefetch %d issued, %d loaded, %d used", k.PrefetchIssued, k.PrefetchLoaded, k.PrefetchUsed)
			}
			if k.H2DCopies != k.Misses+k.PrefetchLoaded || k.PrefetchH2DBytes != k.PrefetchLoaded*size {
				t.Fatalf("%d copies for %d misses and %d prefetched (%d prefetch bytes)", k.H2DCopies, k.Misses, k.PrefetchLoaded, k.PrefetchH2DBytes)
			}
			if p, ok := k.PrefetchPrecision(); !ok || p < 0 || p > 1 {
				t.Fatalf("precision %v", p)
			}
			if r, ok := k.PrefetchRecall(); !ok || r < 0 || r > 1 {
				t.Fatalf("recall %v", r)
			}
			for l := range layers {
				res, _ := c.Resident(l)
				if len(res) != 7 {
					t.Fatalf("layer %d publishes %d experts, capacity 7", l, len(res))
				}
			}
		})
	}
}

// awaitPrefetch waits for layer's prefetch the way a consumer does, by
// leasing the routed group ids, and releases the lease unserved.
func awaitPrefetch(t *testing.T, c *Cache, layer int, ids ...int) {
	t.Helper()
	ls, err := c.Lease(layer, ids)
	if err != nil {
		t.Fatalf("Lease(%d, %v): %v", layer, ids, err)
	}
	ls.Release()
}

// TestLeaseScoresPrediction: the Lease of the routed group, not its
// Serve, scores the layer's pending prediction (once: the prediction is
// cleared) and waits for the layer's prefetch, so its resident rows
// include what the prefetch loaded; hits and misses wait for Serve.
func TestLeaseScoresPrediction(t *testing.T) {
	type want struct {
		groups, predicted, routed, overlap int64
		resident                           []bool
		hits, misses, used                 int64
	}
	cases := []struct {
		name      string
		predicted []int // nil: no Prefetch
		routed    []int
		want      want
	}{
		{"no prediction", nil, []int{0, 6}, want{resident: []bool{true, false}, hits: 1, misses: 1}},
		{"right guess", []int{5, 6}, []int{6, 5}, want{1, 2, 2, 2, []bool{true, true}, 2, 0, 2}},
		{"half right", []int{5, 6}, []int{5, 7}, want{1, 2, 2, 1, []bool{true, false}, 1, 1, 1}},
		{"resident guess", []int{1, 2}, []int{2, 3}, want{1, 2, 2, 1, []bool{true, true}, 2, 0, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, auth, _ := newFaultCache(t, 8, Options{Capacity: 4, Spares: 2, Staging: 2, GroupSize: 2})
			c.BeginRequest()
			if tc.predicted != nil {
				if err := c.Prefetch(0, tc.predicted); err != nil {
					t.Fatal(err)
				}
			}
			ls, err := c.Lease(0, tc.routed)
			if err != nil {
				t.Fatal(err)
			}
			defer ls.Release()
			k := c.Counters()
			w := tc.want
			if k.PrefetchGroups != w.groups || k.PrefetchPredicted != w.predicted || k.PrefetchRouted != w.routed || k.PrefetchOverlap != w.overlap {
				t.Fatalf("after Lease: scored %d groups (%d predicted, %d routed, %d overlap), want %d (%d, %d, %d)",
					k.PrefetchGroups, k.PrefetchPredicted, k.PrefetchRouted, k.PrefetchOverlap, w.groups, w.predicted, w.routed, w.overlap)
			}
			if k.Hits != 0 || k.Misses != 0 || k.PrefetchUsed != 0 {
				t.Fatalf("after Lease: %d hits, %d misses, %d used: a Lease counts none", k.Hits, k.Misses, k.PrefetchUsed)
			}
			for i, r := range ls.Resident() {
				if (r != nil) != w.resident[i] {
					t.Fatalf("Resident()[%d] = %v, want published %v (the Lease waits for the prefetch)", i, r, w.resident[i])
				}
				if r != nil {
					checkRow(t, auth, r, 0, tc.routed[i])
				}
			}
			rows, err := ls.Serve()
			if err != nil {
				t.Fatal(err)
			}
			for i, e := range tc.routed {
				checkRow(t, auth, rows[i], 0, e)
			}
			ls.Release()
			k, err = c.EndRequest()
			if err != nil {
				t.Fatal(err)
			}
			if k.Hits != w.hits || k.Misses != w.misses || k.PrefetchUsed != w.used || k.PrefetchGroups != w.groups {
				t.Fatalf("after Serve: %d hits, %d misses, %d used, %d scored groups; want %d, %d, %d, %d",
					k.Hits, k.Misses, k.PrefetchUsed, k.PrefetchGroups, w.hits, w.misses, w.used, w.groups)
			}
			// The prediction was cleared by the first Lease.
			awaitPrefetch(t, c, 0, tc.routed...)
			if got := c.Counters().PrefetchGroups; got != w.groups {
				t.Fatalf("a second Lease scored again: %d groups", got)
			}
		})
	}
}
