//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// owner is the goroutine that owns the CUDA context. CUDA contexts are
// current per OS thread, so the goroutine locks itself to its thread, makes
// the context current once, and then executes every CUDA call of the backend
// in the order they were submitted. Callers never touch the driver.
//
// Two kinds of work reach it:
//   - do: the caller waits for the result (allocations, copies back to the
//     host, anything that returns a value);
//   - async: the caller only enqueues (kernel launches, uploads of small
//     activations). Arguments were validated on the caller's goroutine;
//     a driver error from an async op is kept and returned by every later
//     do, like CUDA's own sticky errors.
//
// The queue is FIFO, so async work and later do calls run in program order
// and go to the compute stream in that order.
//
// Hand-offs spin. A goroutine blocked on a channel is parked, and waking a
// parked goroutine (the owner's locked thread in particular) costs futex
// wake-ups and thread hand-offs of several microseconds each: with plain
// blocking channels a synchronising round trip (TopK, Argmax) cost ~36 µs
// more than the driver work itself. So while work is coming the owner polls
// its queue instead of parking (for ownerSpin after its last op), and a do
// caller polls for its result (for callerSpin) before parking: a buffered
// channel send to a goroutine that is polling, not parked, wakes nobody.
// Spinning takes a P on each side; with GOMAXPROCS <= 2 both sides park as before.
type owner struct {
	work chan ownerOp
	mu   sync.Mutex // guards closed and the send on work against Close
	// closed is set by stop; later submissions fail with ErrClosed.
	closed bool
	exited chan struct{}

	// spin enables the polling hand-offs (see above); tests and benchmarks
	// may switch it off to compare.
	spin atomic.Bool

	// sticky is the first async failure; only the owner goroutine writes it.
	sticky error
}

type ownerOp struct {
	fn   func() error
	done chan error // nil for async ops
	stop bool
}

// ownerQueue bounds the async queue; an enqueue blocks while it is full,
// like a full CUDA launch queue.
const ownerQueue = 4096

// Spin windows: how long the owner polls for the next op after its last
// one, and how long a do caller polls for its result, before parking.
const (
	ownerSpin  = 500 * time.Microsecond
	callerSpin = 500 * time.Microsecond
)

// ErrClosed is returned by a backend (or its cache device) after Close.
var ErrClosed = errors.New("cuda: backend closed")

// startOwner starts the owner goroutine. setup runs first on the locked
// thread (it creates the context); teardown runs last on the same thread.
func startOwner(setup func() error, teardown func() error) (*owner, error) {
	o := &owner{work: make(chan ownerOp, ownerQueue), exited: make(chan struct{})}
	o.spin.Store(runtime.GOMAXPROCS(0) > 2)
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer close(o.exited)
		if err := setup(); err != nil {
			ready <- err
			return
		}
		ready <- nil
		for {
			op := o.next()
			if op.stop {
				op.done <- teardown()
				return
			}
			if op.done == nil {
				if err := op.fn(); err != nil && o.sticky == nil {
					o.sticky = err
				}
				continue
			}
			if o.sticky != nil {
				op.done <- fmt.Errorf("cuda: an earlier asynchronous operation failed: %w", o.sticky)
				continue
			}
			op.done <- op.fn()
		}
	}()
	if err := <-ready; err != nil {
		<-o.exited
		return nil, err
	}
	return o, nil
}

// next returns the next op, polling for up to ownerSpin before parking.
func (o *owner) next() ownerOp {
	select {
	case op := <-o.work:
		return op
	default:
	}
	if o.spin.Load() {
		start := time.Now()
		for i := 1; ; i++ {
			select {
			case op := <-o.work:
				return op
			default:
			}
			if i&63 == 0 && time.Since(start) > ownerSpin {
				break
			}
		}
	}
	return <-o.work
}

var donePool = sync.Pool{New: func() any { return make(chan error, 1) }}

// do runs fn on the owner thread and returns its error.
func (o *owner) do(fn func() error) error {
	done := donePool.Get().(chan error)
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		donePool.Put(done)
		return ErrClosed
	}
	o.work <- ownerOp{fn: fn, done: done}
	o.mu.Unlock()
	err := o.wait(done)
	donePool.Put(done)
	return err
}

// wait receives the result of a do, polling for up to callerSpin first.
func (o *owner) wait(done chan error) error {
	if o.spin.Load() {
		start := time.Now()
		for i := 1; ; i++ {
			select {
			case err := <-done:
				return err
			default:
			}
			if i&63 == 0 && time.Since(start) > callerSpin {
				break
			}
		}
	}
	return <-done
}

// async enqueues fn and returns at once.
func (o *owner) async(fn func() error) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return ErrClosed
	}
	o.work <- ownerOp{fn: fn}
	return nil
}

// stop runs the teardown after every queued op and ends the goroutine.
func (o *owner) stop() error {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return nil
	}
	o.closed = true
	done := make(chan error, 1)
	o.work <- ownerOp{stop: true, done: done}
	o.mu.Unlock()
	err := <-done
	<-o.exited
	return err
}
