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

// horizon_launch launches f with nargs 8-byte arguments (each kernel
// parameter reads as many bytes as it has: 4 for int and float, 8 for
// pointers) and, when blob is not NULL, one more parameter read from blob
// (a struct passed by value, e.g. the grouped kernels' row table). The
// driver copies every parameter before cuLaunchKernel returns, so the
// arguments may live on the caller's stack.
#define HORIZON_MAX_ARGS 24
static CUresult horizon_launch(CUfunction f, unsigned grid, unsigned block, unsigned smem, CUstream s,
                               const unsigned long long* args, int nargs, const void* blob) {
	void* params[HORIZON_MAX_ARGS + 1];
	unsigned long long a[HORIZON_MAX_ARGS];
	if (nargs < 0 || nargs > HORIZON_MAX_ARGS) return CUDA_ERROR_INVALID_VALUE;
	for (int i = 0; i < nargs; i++) {
		a[i] = args[i];
		params[i] = &a[i];
	}
	params[nargs] = (void*)blob;
	return cuLaunchKernel(f, grid, 1, 1, block, 1, 1, smem, s, params, NULL);
}

// horizon_launch_pdl is horizon_launch (without blob) as a programmatic
// dependent launch: f may start before the kernel ahead of it on s has
// completed, and waits for it itself (griddepcontrol.wait, kernels/common.cuh).
static CUresult horizon_launch_pdl(CUfunction f, unsigned grid, unsigned block, unsigned smem, CUstream s,
                                   const unsigned long long* args, int nargs) {
	void* params[HORIZON_MAX_ARGS];
	unsigned long long a[HORIZON_MAX_ARGS];
	if (nargs < 0 || nargs > HORIZON_MAX_ARGS) return CUDA_ERROR_INVALID_VALUE;
	for (int i = 0; i < nargs; i++) {
		a[i] = args[i];
		params[i] = &a[i];
	}
	CUlaunchAttribute attr;
	attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
	attr.value.programmaticStreamSerializationAllowed = 1;
	CUlaunchConfig cfg = {0};
	cfg.gridDimX = grid, cfg.gridDimY = 1, cfg.gridDimZ = 1;
	cfg.blockDimX = block, cfg.blockDimY = 1, cfg.blockDimZ = 1;
	cfg.sharedMemBytes = smem;
	cfg.hStream = s;
	cfg.attrs = &attr;
	cfg.numAttrs = 1;
	return cuLaunchKernelEx(&cfg, f, params, NULL);
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

// rawEvent returns the CUevent of a cu.Event (one pointer, checked by
// checkHandleLayout).
func rawEvent(e cu.Event) C.CUevent {
	return *(*C.CUevent)(unsafe.Pointer(&e))
}

// recordEventExternal records ev on s. While s is being captured it adds
// an event record node to the graph (CU_EVENT_RECORD_EXTERNAL), so every
// launch of the graph records ev; a plain cuEventRecord during capture only
// marks a dependency point for other streams and records nothing when the
// graph runs.
func recordEventExternal(ev cu.Event, s cu.Stream) error {
	return check("cuEventRecordWithFlags", C.cuEventRecordWithFlags(rawEvent(ev), rawStream(s), C.CU_EVENT_RECORD_EXTERNAL))
}

var errLayout = errors.New("gorgonia.org/cu handle layout changed: cu.Function, cu.Stream or cu.Event is no longer one pointer")

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
	var e cu.Event
	var ce C.CUevent
	if unsafe.Sizeof(e) != unsafe.Sizeof(ce) {
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

// setCarveout sets fn's preferred shared-memory carveout: pct percent of
// the SM's unified L1/shared storage, or the driver's default for pct < 0.
func setCarveout(fn cu.Function, pct int) error {
	v := C.int(pct)
	if pct < 0 {
		v = C.CU_SHAREDMEM_CARVEOUT_DEFAULT
	}
	return check("cuFuncSetAttribute(PREFERRED_SHARED_MEMORY_CARVEOUT)",
		C.cuFuncSetAttribute(rawFunction(fn), C.CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, v))
}

// staticShared is the static shared memory fn declares, in bytes.
func staticShared(fn cu.Function) (int, error) {
	var n C.int
	err := check("cuFuncGetAttribute(SHARED_SIZE_BYTES)",
		C.cuFuncGetAttribute(&n, C.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, rawFunction(fn)))
	return int(n), err
}

// graph is an instantiated CUDA graph captured from a stream.
type graph struct {
	g    C.CUgraph
	exec C.CUgraphExec
}

// beginCapture starts capturing the work issued to s. Relaxed mode: the
// launch helpers query occupancy while they issue, which the stricter modes
// may refuse during a capture; one thread owns the context, so nothing else
// can slip into the capture.
func beginCapture(s cu.Stream) error {
	return check("cuStreamBeginCapture", C.cuStreamBeginCapture(rawStream(s), C.CU_STREAM_CAPTURE_MODE_RELAXED))
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

// maxLaunchArgs is HORIZON_MAX_ARGS.
const maxLaunchArgs = 24

// launchKernel launches fn on s with the 8-byte arguments args and, when
// blob is not nil, one more by-value parameter of the kernel's size read
// from blob. It replaces cu.Function.Launch, which allocates C memory on
// every call and cannot pass structs.
func launchKernel(fn cu.Function, grid, block, smem int, s cu.Stream, args []uint64, blob unsafe.Pointer) error {
	ap, err := launchArgs("cuLaunchKernel", args)
	if err != nil {
		return err
	}
	return check("cuLaunchKernel", C.horizon_launch(rawFunction(fn), C.uint(grid), C.uint(block), C.uint(smem),
		rawStream(s), ap, C.int(len(args)), blob))
}

// launchKernelPDL is launchKernel (no blob) as a programmatic dependent
// launch (CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION): fn may
// start while the kernel before it on s still runs, so fn must call
// grid_dep_enter before any access that depends on it (kernels/common.cuh).
func launchKernelPDL(fn cu.Function, grid, block, smem int, s cu.Stream, args []uint64) error {
	ap, err := launchArgs("cuLaunchKernelEx", args)
	if err != nil {
		return err
	}
	return check("cuLaunchKernelEx", C.horizon_launch_pdl(rawFunction(fn), C.uint(grid), C.uint(block), C.uint(smem),
		rawStream(s), ap, C.int(len(args))))
}

// launchArgs is args as the C launch helpers take them (nil for none), or
// an error naming call when there are more than they hold.
func launchArgs(call string, args []uint64) (*C.ulonglong, error) {
	if len(args) > maxLaunchArgs {
		return nil, fmt.Errorf("%s: %d arguments, at most %d", call, len(args), maxLaunchArgs)
	}
	if len(args) == 0 {
		return nil, nil
	}
	return (*C.ulonglong)(unsafe.Pointer(&args[0])), nil
}

// blocksPerSM is how many blocks of fn (block threads, smem bytes of dynamic
// shared memory) one multiprocessor holds at once.
func blocksPerSM(fn cu.Function, block, smem int) (int, error) {
	var n C.int
	err := check("cuOccupancyMaxActiveBlocksPerMultiprocessor",
		C.cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, rawFunction(fn), C.int(block), C.size_t(smem)))
	return int(n), err
}

// setPrimaryFlags asks for spin-waiting synchronisation (the owner thread
// is ours to burn while it waits: this is the lowest-latency wait) and for
// mapped pinned memory, before the primary context is first retained. A
// context that is already active keeps its flags (the error is returned and
// may be ignored).
func setPrimaryFlags(dev cu.Device) error {
	err := check("cuDevicePrimaryCtxSetFlags",
		C.cuDevicePrimaryCtxSetFlags(C.CUdevice(dev), C.CU_CTX_SCHED_SPIN|C.CU_CTX_MAP_HOST))
	if err != nil {
		// CU_CTX_MAP_HOST is implied on every 64-bit UVA system; a driver
		// that rejects it still takes the spin policy alone.
		err = check("cuDevicePrimaryCtxSetFlags", C.cuDevicePrimaryCtxSetFlags(C.CUdevice(dev), C.CU_CTX_SCHED_SPIN))
	}
	return err
}

// hostAllocMapped allocates n bytes of pinned host memory that kernels can
// write directly (zero-copy) and returns its host and device addresses.
func hostAllocMapped(n int) (unsafe.Pointer, cu.DevicePtr, error) {
	var p unsafe.Pointer
	if err := check("cuMemHostAlloc(DEVICEMAP)", C.cuMemHostAlloc(&p, C.size_t(n), C.CU_MEMHOSTALLOC_PORTABLE|C.CU_MEMHOSTALLOC_DEVICEMAP)); err != nil {
		return nil, 0, err
	}
	var d C.CUdeviceptr
	if err := check("cuMemHostGetDevicePointer", C.cuMemHostGetDevicePointer(&d, p, 0)); err != nil {
		C.cuMemFreeHost(p)
		return nil, 0, err
	}
	return p, cu.DevicePtr(d), nil
}
