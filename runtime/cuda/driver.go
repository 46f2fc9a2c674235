//go:build cuda

package cuda

// This file is the package's only cgo: the few CUDA driver calls
// gorgonia.org/cu v0.9.6 does not wrap (pinned host memory, a kernel's
// dynamic shared-memory limit, stream capture into graphs), and the
// conversion of their CUresult into Go errors. Every function here runs on
// the context-owner thread (see owner.go) and never panics.

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>
#include <stdlib.h>

static const char* horizon_err_name(CUresult r) {
	const char* s = NULL;
	if (cuGetErrorName(r, &s) != CUDA_SUCCESS || s == NULL) return "CUDA_ERROR_UNKNOWN";
	return s;
}
static const char* horizon_err_string(CUresult r) {
	const char* s = NULL;
	if (cuGetErrorString(r, &s) != CUDA_SUCCESS || s == NULL) return "unknown error";
	return s;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// DriverError is a CUresult from a driver call made by this package.
type DriverError struct {
	Call string // e.g. "cuMemHostAlloc"
	Code int    // the CUresult
	Name string // e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Text string // the driver's description
}

func (e *DriverError) Error() string {
	return fmt.Sprintf("%s: %s (%s)", e.Call, e.Name, e.Text)
}

func check(call string, r C.CUresult) error {
	if r == C.CUDA_SUCCESS {
		return nil
	}
	return &DriverError{
		Call: call,
		Code: int(r),
		Name: C.GoString(C.horizon_err_name(r)),
		Text: C.GoString(C.horizon_err_string(r)),
	}
}

// hostAlloc allocates n bytes of page-locked host memory that copies on any
// stream can read asynchronously (cuMemHostAlloc, portable).
func hostAlloc(n int) (unsafe.Pointer, error) {
	if n <= 0 {
		return nil, fmt.Errorf("cuMemHostAlloc(%d): size must be positive", n)
	}
	var p unsafe.Pointer
	if err := check("cuMemHostAlloc", C.cuMemHostAlloc(&p, C.size_t(n), C.CU_MEMHOSTALLOC_PORTABLE)); err != nil {
		return nil, err
	}
	return p, nil
}

// hostFree releases memory from hostAlloc.
func hostFree(p unsafe.Pointer) error {
	return check("cuMemFreeHost", C.cuMemFreeHost(p))
}

// hostRegister page-locks existing host memory (for example the host
// authority's read-only expert records) so that copies from it run at pinned
// speed. The memory must stay allocated until hostUnregister.
func hostRegister(p unsafe.Pointer, n int) error {
	return check("cuMemHostRegister", C.cuMemHostRegister(p, C.size_t(n), C.CU_MEMHOSTREGISTER_PORTABLE|C.CU_MEMHOSTREGISTER_READ_ONLY))
}

func hostUnregister(p unsafe.Pointer) error {
	return check("cuMemHostUnregister", C.cuMemHostUnregister(p))
}

// rawFunction returns the CUfunction inside a cu.Function, which keeps it
// unexported; cu.Function is a struct of exactly that one handle (checked in
// init below).
func rawFunction(fn cu.Function) C.CUfunction {
	return *(*C.CUfunction)(unsafe.Pointer(&fn))
}

// rawStream returns the CUstream of a cu.Stream.
func rawStream(s cu.Stream) C.CUstream {
	c := s.C()
	return *(*C.CUstream)(unsafe.Pointer(&c))
}

var errLayout = errors.New("gorgonia.org/cu handle layout changed: cu.Function or cu.Stream is no longer one pointer")

func checkHandleLayout() error {
	var fn cu.Function
	var c C.CUfunction
	if unsafe.Sizeof(fn) != unsafe.Sizeof(c) {
		return errLayout
	}
	var s cu.Stream
	var cs C.CUstream
	if unsafe.Sizeof(s) != unsafe.Sizeof(cs) {
		return errLayout
	}
	return nil
}

// setMaxDynamicShared raises the dynamic shared memory a launch of fn may
// request above the default 48 KiB (up to the device's opt-in limit).
func setMaxDynamicShared(fn cu.Function, bytes int) error {
	return check("cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)",
		C.cuFuncSetAttribute(rawFunction(fn), C.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, C.int(bytes)))
}

// graph is an instantiated CUDA graph captured from a stream.
type graph struct {
	g    C.CUgraph
	exec C.CUgraphExec
}

// beginCapture starts capturing the work issued to s (thread-local mode:
// only this thread's calls are captured, which is every call, since one
// thread owns the context).
func beginCapture(s cu.Stream) error {
	return check("cuStreamBeginCapture", C.cuStreamBeginCapture(rawStream(s), C.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL))
}

// endCapture stops capturing s and instantiates what was captured.
func endCapture(s cu.Stream) (*graph, error) {
	var g C.CUgraph
	if err := check("cuStreamEndCapture", C.cuStreamEndCapture(rawStream(s), &g)); err != nil {
		return nil, err
	}
	var exec C.CUgraphExec
	if err := check("cuGraphInstantiate", C.cuGraphInstantiateWithFlags(&exec, g, 0)); err != nil {
		C.cuGraphDestroy(g)
		return nil, err
	}
	return &graph{g: g, exec: exec}, nil
}

// launch replays the graph on s.
func (g *graph) launch(s cu.Stream) error {
	return check("cuGraphLaunch", C.cuGraphLaunch(g.exec, rawStream(s)))
}

func (g *graph) destroy() error {
	return errors.Join(check("cuGraphExecDestroy", C.cuGraphExecDestroy(g.exec)), check("cuGraphDestroy", C.cuGraphDestroy(g.g)))
}

// attrSmemOptin is CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
// which gorgonia.org/cu v0.9.6 does not name.
const attrSmemOptin = C.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
