package cache

import (
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/device"
)

// TestConcurrentConsumers runs goroutines that acquire groups on several
// layers, sometimes holding one lease while acquiring on another layer,
// and check that every row holds its expert's bytes from acquire to
// release. Under -race, a copy into a leased row would also be reported as
// a data race between the copy stream and the consumer's reads.
func TestConcurrentConsumers(t *testing.T) {
	cases := []struct {
		name                                     string
		layers, experts, capacity, group, spares int
		staging, workers, iters                  int
		policy, transport                        string
	}{
		{"lru-tight", 3, 16, 6, 3, 3, 2, 6, 300, "lru", TransportStaged},
		{"lru-roomy", 2, 24, 12, 4, 12, 4, 8, 300, "lru", TransportStaged},
		{"fifo", 2, 12, 5, 2, 4, 1, 4, 300, "fifo", TransportStaged},
		{"full", 2, 8, 8, 4, 4, 1, 4, 300, "lru", TransportStaged},
		{"lru-tight-registered", 3, 16, 6, 3, 3, 0, 6, 300, "lru", TransportRegistered},
		{"lru-roomy-registered", 2, 24, 12, 4, 12, 0, 8, 300, "lru", TransportRegistered},
		{"fifo-registered", 2, 12, 5, 2, 4, 0, 4, 300, "fifo", TransportRegistered},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			const size = 1000
			auth := newFakeAuthority(t, tc.layers, tc.experts, size)
			c, err := New(newCPUDevice(t), auth, tc.layers, tc.experts, Options{
				Capacity: tc.capacity, Spares: tc.spares, Staging: tc.staging, GroupSize: tc.group, Policy: tc.policy,
				Transport: tc.transport,
			})
			if err != nil {
				t.Fatal(err)
			}
			c.Admit()
			var served, requested, backoff atomic.Int64
			var wg sync.WaitGroup
			errc := make(chan error, tc.workers)
			report := func(err error) {
				select {
				case errc <- err:
				default: // one error per worker is enough to fail
				}
			}
			for w := 0; w < tc.workers; w++ {
				wg.Add(1)
				go func(seed uint64) {
					defer wg.Done()
					r := rand.New(rand.NewPCG(seed, 1))
					// acquire serves one group; with retry it waits out
					// back-pressure (only while holding nothing, so
					// consumers never wait on each other in a cycle).
					acquire := func(l int, ids []int, retry bool) (done func(), ok bool) {
						for {
							rows, release, err := device.Acquire(c, l, ids)
							if errors.Is(err, ErrNoVictim) || errors.Is(err, ErrNoSpare) {
								backoff.Add(1)
								if !retry {
									return func() {}, true
								}
								runtime.Gosched()
								continue
							}
							if err != nil {
								report(err)
								return nil, false
							}
							served.Add(1)
							requested.Add(int64(len(ids)))
							check := func() bool {
								for j, e := range ids {
									if err := rowErr(t, auth, rows[j], l, e); err != nil {
										report(err)
										return false
									}
								}
								return true
							}
							if !check() {
								return nil, false
							}
							return func() {
								check()
								release()
							}, true
						}
					}
					for i := 0; i < tc.iters; i++ {
						l := r.IntN(tc.layers)
						done, ok := acquire(l, randomGroup(r, tc.experts, 1+r.IntN(tc.group)), true)
						if !ok {
							return
						}
						runtime.Gosched()
						if r.IntN(3) == 0 {
							// Hold this lease across an acquire on another layer.
							done2, ok := acquire((l+1)%tc.layers, randomGroup(r, tc.experts, 1+r.IntN(tc.group)), false)
							if !ok {
								done()
								return
							}
							runtime.Gosched()
							done()
							done2()
						} else {
							done()
						}
					}
				}(uint64(w + 1))
			}
			wg.Wait()
			close(errc)
			for err := range errc {
				t.Fatal(err)
			}
			d := c.Counters().Sub(c.Preparation())
			if d.Hits+d.Misses != requested.Load() || d.H2DCopies != d.Misses || d.H2DBytes != d.Misses*size {
				t.Fatalf("counters %+v for %d requested experts", d, requested.Load())
			}
			if (tc.transport == TransportRegistered) != (d.StagingBytes == 0 && d.H2DBytes > 0) {
				t.Fatalf("%s transport: %d staging bytes for %d h2d bytes", tc.transport, d.StagingBytes, d.H2DBytes)
			}
			for l := 0; l < tc.layers; l++ {
				res, _ := c.Resident(l)
				if len(res) != tc.capacity {
					t.Fatalf("layer %d: %d published", l, len(res))
				}
				for ri, row := range c.layers[l].rows {
					if row.leases != 0 {
						t.Fatalf("layer %d row %d: %d leases after every release", l, ri, row.leases)
					}
				}
			}
			t.Logf("%d groups served, %d hits, %d misses, %d back-offs", served.Load(), d.Hits, d.Misses, backoff.Load())
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
