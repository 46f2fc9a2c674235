// Package device defines what the engine and the residency cache need of
// a compute device beyond its ops (runtime/backend): rows of device memory
// for expert records, pinned staging, registration of host memory,
// asynchronous host-to-device copies and stream events (Device). A backend
// implements these interfaces; the cache and the engine drive them. Living
// below both, they let a device backend (runtime/cuda) implement them
// without importing the cache or the engine: imports flow from the engine
// and the cache down to the interfaces, and from the backends down to
// them, never from a backend up.
package device

import (
	"errors"

	"github.com/horizon-runmap/horizon/runtime/backend"
)

// ErrNotRegistered is returned (wrapped) by Device.CopyHostToRow when the
// source is not inside host memory registered with Device.RegisterHost.
var ErrNotRegistered = errors.New("copy source is not inside registered host memory")

// Device is the slice of a device the residency cache (runtime/cache)
// needs: rows of device memory,
// pinned staging buffers, registration (page-locking) of host memory the
// caller owns, asynchronous host-to-device copies on a copy stream, and
// events on the copy and compute streams.
//
// The CPU implementation (CPUDevice) stands Go buffers in for device memory
// and runs copies on a goroutine; the CUDA backend implements the same
// methods with cuMemAlloc rows, cuMemHostAlloc staging, cuMemHostRegister,
// cuMemcpyHtoDAsync on a dedicated copy stream and cuEventRecord.
//
// There is deliberately no device-to-host method: eviction discards, and
// nothing in the cache can move expert bytes back to the host.
//
// Methods may be called from several goroutines at once.
type Device interface {
	// Name identifies the device in error messages ("cpu", "cuda:0").
	Name() string

	// AllocRow allocates one row of device memory of n bytes: the home of
	// one expert record.
	AllocRow(n int) (Row, error)
	// FreeRow releases a row. The caller guarantees no copy or compute
	// still touches it.
	FreeRow(r Row) error

	// AllocStaging allocates one pinned (page-locked) host buffer of n
	// bytes that copies can read from asynchronously.
	AllocStaging(n int) (Staging, error)
	// FreeStaging releases a staging buffer.
	FreeStaging(s Staging) error

	// CopyToRow enqueues a copy of src.Host()[off:off+n] to the same
	// bytes of dst (dst's off..off+n) on the copy stream and returns at
	// once: a record may go in several runs, each enqueued as soon as its
	// bytes are staged. The returned event completes when the copy has
	// finished reading src and writing dst; until then the caller must not
	// write those bytes of src or hand dst to a consumer.
	//
	// An error means nothing was enqueued.
	CopyToRow(dst Row, src Staging, off, n int) (Event, error)

	// RegisterHost page-locks host memory the caller owns (the host
	// authority: read-only, mapped outside the Go heap) so that
	// CopyHostToRow can read it asynchronously without staging. Ranges
	// must not overlap one already registered. The returned function
	// unregisters it; mem must stay mapped and unchanged until then, and
	// no copy from it may still be running.
	RegisterHost(mem []byte) (unregister func() error, err error)
	// CopyHostToRow is CopyToRow from registered memory: it enqueues a copy
	// of src[:n] to the start of dst on the copy stream and returns at
	// once; the event completes when the copy has finished reading src and
	// writing dst. src[:n] must lie inside one range registered with
	// RegisterHost and not yet unregistered; otherwise it fails with an
	// error wrapping ErrNotRegistered.
	//
	// An error means nothing was enqueued.
	CopyHostToRow(dst Row, src []byte, n int) (Event, error)

	// RecordCompute records an event on the compute stream. It completes
	// once every compute operation issued before the call, from any
	// goroutine, has completed; in particular every read of a row by an
	// executor whose work was issued before the call.
	RecordCompute() (Event, error)
}

// RowsAllocator is a Device that can allocate many rows at once (the CUDA
// device carves them from one allocation: the driver rounds every
// allocation up to whole 2 MiB pages, which costs a row of its own up to a
// page). The cache allocates each layer's rows with one call when its
// device implements it. FreeRow still frees rows one by one.
type RowsAllocator interface {
	// AllocRows allocates count rows of n bytes each.
	AllocRows(n, count int) ([]Row, error)
}

// Row is one device buffer holding one expert record.
type Row interface {
	// Tensor is the row as a backend tensor that executors read
	// (backend.Bytes, at least one record long).
	Tensor() backend.Tensor
}

// Staging is one pinned host buffer.
type Staging interface {
	// Host is the buffer's host view; its length is the allocated size.
	Host() []byte
}

// Event marks a point on a stream.
//
// Wait and Query may be called any number of times, from any goroutine,
// and report the same outcome once the event completed.
type Event interface {
	// Wait blocks until the event completed. A nil error means every
	// operation the event covers completed successfully. A non-nil error
	// means the device could not confirm that: the cache treats every
	// buffer those operations touched as being in an unknown state.
	Wait() error
	// Query reports without blocking whether the event completed; its
	// error has the same meaning as Wait's.
	Query() (done bool, err error)
}
