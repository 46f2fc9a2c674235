//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
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
type owner struct {
	work chan ownerOp
	mu   sync.Mutex // guards closed and the send on work against Close
	// closed is set by stop; later submissions fail with ErrClosed.
	closed bool
	exited chan struct{}

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

// ErrClosed is returned by a backend (or its cache device) after Close.
var ErrClosed = errors.New("cuda: backend closed")

// startOwner starts the owner goroutine. setup runs first on the locked
// thread (it creates the context); teardown runs last on the same thread.
func startOwner(setup func() error, teardown func() error) (*owner, error) {
	o := &owner{work: make(chan ownerOp, ownerQueue), exited: make(chan struct{})}
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
		for op := range o.work {
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
	err := <-done
	donePool.Put(done)
	return err
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
