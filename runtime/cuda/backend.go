//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/half"
)

// Backend implements backend.Backend on one GPU.
type Backend struct {
	o       *owner
	ordinal int
	name    string // device name, for messages

	// Set during setup on the owner thread, read-only afterwards.
	dev     cu.Device
	ctx     cu.CUContext
	compute cu.Stream
	copy    cu.Stream
	mods    []cu.Module
	// waitPF is matvec_f16's hz_wait_prefetch (setTuning writes it);
	// waitPFErr says why it is 0 when the module's global was not found.
	waitPF    cu.DevicePtr
	waitPFErr error
	k         kernelSet
	sms       int // streaming multiprocessors
	smemMax   int // dynamic shared memory a launch may request (opt-in limit)
	// persistentSmem is the dynamic shared memory each persistent build
	// may request (the opt-in limit less its static shared memory).
	persistentSmem [len(persistentBuilds)]int
	// routeInSmem is the dynamic shared memory the route-in expert kernels
	// (experts_routed.cu) may request.
	routeInSmem int

	// Owner-thread state.
	ring     *uploadRing
	readback pinned       // pinned buffer for device-to-host reads
	small    cu.DevicePtr // top-k ids/weights and argmax result (when results are not mapped)
	results  mappedBuf    // the same results in mapped pinned memory (zero-copy), when it works
	masked   cu.DevicePtr // EOS ids for Argmax
	idx      cu.DevicePtr // ExpertMatMul's gather and scatter rows (batched.go rowIndex)
	// AttentionRows' partials and tickets, TopKRows' results (rowops.go).
	attRowsPart, attRowsCnt, topkRows *Tensor
	// tcPart holds the split-K partials of matmul_tc_f16_splitk
	// (split-K, the default; tuning.tcNoSplitK turns it off).
	tcPart *Tensor
	// tcSplitBuf holds a pre-split's hi, lo and 2^-s arrays
	// (the default; tuning.tcNoPreSplit turns it off).
	tcSplitBuf *Tensor
	combW      *Tensor // CombineRows' weights
	// Device routings (routed.go): every buffer set allocated, and the
	// free ones; owner thread only. routeOff mirrors tuning.noRouteDevice
	// (or no tensor-core experts, or no pre-split: what device routing
	// needs) for RoutesOnDevice, which the engine's goroutine asks. Like
	// every tuning mirror its zero value is the default, on: a backend
	// that never had setTuning (every production one) routes on the device.
	routeAll, routeFree []*routeBufs
	routeBases          map[string]cu.DevicePtr // the record bases' device copies by their bytes (routeBasesOf)
	routeLaunches       int                     // RouteRows launched (tests)
	gateUpLaunches      int                     // RoutedGateUp's one-launch builds launched (tests)
	attnInRowsLaunches  int                     // QKRoPEKVRows launches (tests)
	routeOff            atomic.Bool
	attnInRowsOff       atomic.Bool // mirrors tuning.noAttnInRows for FusesAttnIn (the engine's goroutine asks)
	idxBytes            int
	maskedN             int        // capacity of masked in ids
	lastMask            []int      // ids currently in masked
	fusedAct            *Tensor    // FusedExperts scratch
	attPart             *Tensor    // Attention scratch: partials [Hq][attSplit][hd+2]
	attCnt              *Tensor    // Attention's per-head tickets (zero between launches: the last block resets its own)
	events              []cu.Event // completed events ready for reuse
	occ                 map[occKey]int
	tune                tuning
	// expertAct16: the declared FP16 expert activations (activations.go,
	// SetExpertActivations; owner thread), kept apart from tune so that a
	// Load's FP32 default does not clear a measurement knob (tcA16Row).
	expertAct16 bool
	// a16rSplits counts the row-shift FP16 pre-splits (tcPresplitRows):
	// one for each grouped expert launch that ran a row-shift build.
	a16rSplits int
	// a16cSplits counts the chunk-shift FP16 pre-splits (tcPresplitA16) and
	// a16cRounds the rows rounded in FP32 instead (roundRowsA16): the
	// FP16-activation projections (MatMulA16, activations.go).
	// a16cInKernel counts the split-K launches of the two-stage kernel's
	// FP16 build, which split the activations themselves.
	a16cSplits, a16cRounds, a16cInKernel int
	// a16Rows holds roundRowsA16's rows.
	a16Rows *Tensor
	// rec, while not nil, receives the launches launch would make
	// (recordLaunches); fnName names every loaded kernel for it.
	rec    *[]launchRec
	recTag string
	fnName map[cu.Function]string
	// pdlFns are the kernels that call grid_dep_enter (every module but
	// bench and persistent: pdlModules). While pdl is set (a captured
	// step's graph is being recorded: stepper.capture; a batched prefill
	// runs: BeginPrefill, unless tuning.noPrefillPDL) launch issues them
	// as programmatic dependent launches, every one after the first
	// kernel; pdlLaunches counts those of captures, pdlOpLaunches those
	// launched op by op (tests read them).
	pdlFns        map[cu.Function]bool
	pdl           bool
	pdlPrev       bool             // the capture has launched a kernel already
	timelines     []*instrTimeline // the live steppers' timelines (tuning.timeline; step_timeline.go)
	attTrace      *attTraceBuf     // the last set-up stepper's attention trace (tuning.attTrace; step_att_trace.go)
	inPrefill     bool             // between BeginPrefill and EndPrefill
	pdlLaunches   int
	pdlOpLaunches int
	// moeLaunches counts launches of the fused routed-experts kernel
	// (fusedExperts; tests read it).
	moeLaunches int
	// routeInLaunches counts the route-in gate/up kernels captured
	// (routeIn; tests read it).
	routeInLaunches int
	// sharedForks counts the shared-expert matvecs captured on a side
	// branch (the default graph-full shared-expert branch; tests read it).
	sharedForks int
	// ropeInQKVLaunches counts the q|k|v matvecs with RoPE in their
	// epilogue (tuning.ropeInQKV; tests read it).
	ropeInQKVLaunches int
	// attPrefetchLaunches counts the attention launches that prefetch
	// their first K/V rows into L2 before their wait (tuning.attPrefetch;
	// tests read it).
	attPrefetchLaunches int
	// attPipeLaunches counts the attention launches of the pipelined
	// kernel (tuning.attPipe; tests read it).
	attPipeLaunches int
	// attRingLaunches counts the attention launches of the ring kernel
	// (tuning.attRing; tests read it).
	attRingLaunches int
	// attTraceLaunches counts the attention launches that record the
	// trace (tuning.attTrace).
	attTraceLaunches int
	// attB3Launches counts the attention launches of the three-blocks-an-SM
	// build (tuning.attB3).
	attB3Launches int
	// attCsLaunches counts the attention launches of the streaming-load
	// build (the default; tuning.noAttStream turns it off).
	attCsLaunches int
	// attFences counts the event nodes tuning.attFence captured.
	attFences int
	// tcdLaunches counts launches of experts_tc.cu's kernels
	// (tuning.tcDecode), for the tests.
	tcdLaunches int
	// tcLaunches counts the tensor-core matmul launches (matmulTC; tests
	// read it).
	tcLaunches int
	// capturing is set while the stepper captures a graph (the L2
	// prefetch branch forks only then).
	capturing bool
	// prefetchLaunches counts the L2 prefetch kernels captured (tests
	// read it).
	prefetchLaunches int
	// traced is the last persistent stepper set up with tuning.traceUnits
	// (profiles read its traces: persistentProfile).
	traced *stepper

	rows *Rows
}

var _ backend.Backend = (*Backend)(nil)

// threadStackBytes is the per-thread stack limit the backend sets (see
// Open).
const threadStackBytes = 256

// Open creates a backend on GPU ordinal: retains the primary context, creates
// the compute and copy streams, and loads every kernel module (the PTX is
// JIT-compiled for the GPU here, so a GPU the PTX cannot target fails now,
// not mid-run).
func Open(ordinal int) (*Backend, error) {
	b := &Backend{ordinal: ordinal}
	o, err := startOwner(b.setup, b.teardown)
	if err != nil {
		return nil, fmt.Errorf("cuda: open device %d: %w", ordinal, err)
	}
	b.o = o
	b.rows = &Rows{b: b}
	return b, nil
}

// Close waits for queued work, releases every buffer the backend owns
// internally and the context. Tensors not freed are released with the
// context.
func (b *Backend) Close() error { return b.o.stop() }

// Name implements backend.Backend.
func (b *Backend) Name() string { return "cuda" }

// DeviceName is the GPU's marketing name, e.g. "NVIDIA H200".
func (b *Backend) DeviceName() string { return b.name }

// SMs is the number of streaming multiprocessors.
func (b *Backend) SMs() int { return b.sms }

const (
	smallBytes  = 4096
	smallIDs    = 0   // int32[64]
	smallW      = 256 // float32[64]
	smallArgmax = 512 // int32
	maxGroup    = 64  // experts in a routed group (GroupTable in kernels/experts_grouped.cu)
)

// tuning holds launch choices that change speed, never results: a row's
// arithmetic does not depend on how rows are grouped into warp tasks, how
// many chunks a step loads or how many blocks run (kernels/common.cuh,
// row_pipeline), and the down kernel's combine order is fixed. Zero values
// mean the built-in heuristics. Benchmarks set it (on the owner thread) to
// compare variants in one run; it is read on the owner thread only.
type tuning struct {
	f16NR           int    // FP16 matvec rows per warp task: 1, 2 or 4
	w4NR            int    // int4 matvec rows per warp task: 1, 2, 4 or 8
	gateUpNRP       int    // grouped gate/up: 2 or 4 (gate rows, and as many up rows, per task)
	downVariant     int    // grouped down: 1 + index into downVariants
	downTile        int    // grouped down: output rows per block (rounded up to a multiple of the variant's NR)
	noMapped        bool   // TopK/Argmax read results back with a copy even when mapped memory works
	traceUnits      bool   // persistent steps record each unit's timestamps (persistentProfile)
	noPrefetch      bool   // persistent programs prefetch nothing into L2
	keepGrids       bool   // persistent programs keep every launch's grid (no regrid)
	noPDL           bool   // captured steps launch every kernel plainly (no programmatic dependent launch)
	l2Prefetch      bool   // captured steps run the L2 prefetch branch (step_prefetch.go; off by default: slower on the H200)
	l2Budget        int    // bytes one prefetch fork takes at most (0: l2PrefetchBudget)
	l2Normal        bool   // prefetched lines keep the normal eviction priority, not evict_last
	l2Grid          int    // the prefetch kernel's grid (0: l2PrefetchGrid)
	l2Empty         bool   // the branch is captured, but its kernels prefetch 0 bytes (what the branch alone costs)
	fusedMoE        bool   // captured steps run a grouped-v1 int4 group as one experts_moe_int4_t launch (off by default: slower on the H200)
	downLate        bool   // the _t down kernels wait (grid_dep_enter) before their first weight loads, as before early loads were the default
	routeFused      bool   // captured steps run the router matvec and route_step as one router_route_step launch
	ropeInQKV       bool   // a layer without q/k norms runs RoPE and the KV append in its q|k|v matvec's epilogue (matvec_f16_rope_kv), not in rope_kv_step (ropeInQKV; the same bits; not yet measured)
	noSharedFork    bool   // graph-full steps run a shared expert in line on the compute stream, not on the side branch (step_shared_fork.go; the branch is the default since session 23: Qwen decode +14%, results/h200-s23)
	sharedForkNR    int    // the shared-expert branch's matvecs take at most this many blocks an SM (0: sharedForkBlocks)
	sharedForkEmpty bool   // a control for the branch's depth penalty: graph-full forks and joins the branch as usual but runs only an empty kernel on it, and the shared expert in line (the graph's shape without the branch's work; results/h200-s28)
	sharedForkGUM   bool   // the branch runs only the shared expert's gate|up|mix matvec, and SiLU·up, down and the gated add follow the join in line (session 22's first variant: 2% slower than the whole branch, results/h200-s23)
	attPrefetch     int    // captured steps' attention asks L2 for each block's first attPrefetch K/V rows before its dependency wait, while the rope/append kernel before it leaves HBM idle (attention_pf_step; 0, the default: none; the same bits; session 25 on an H100: within ±0.8% on Qwen at depth 8,064, +2.4-2.6% on OLMoE at 2,048-3,968 in one run)
	attCarveout     int    // captured steps' decode attention kernels prefer this percent of the SM's L1/shared storage as shared memory (cuFuncSetAttribute, set when a stepper is set up; 0: the driver's default): a candidate should the attention trace show its blocks in a second wave behind a shared-memory configuration (results/h200-s28); the same bits
	attFence        int    // captured steps get an event record node next to each attention instruction (1 before it, 2 after it, 3 both; step_att_trace.go): the timeline's nodes removed the branch's depth penalty from the attention (results/h200-s28), so this asks whether one node a layer does; the same bits
	attB3           bool   // captured steps' decode attention is attention_b3_step, attention_step built for three blocks an SM (80 registers, a few spilled), a candidate should the attention trace show a second wave of blocks (results/h200-s28); the same bits
	noAttStream     bool   // captured steps' decode attention is attention_step (K/V loads through L2 at the normal priority, ld.global.cg), not attention_cs_step, the default since session 29, whose K/V loads are streaming (ld.global.cs: evict-first in L1 and L2), so that the deep cache's one-pass reads do not push out of L2 the lines the rest of the layer reuses: on an H100 Qwen with the shared-expert branch decoded at depth 8,064 at 407.6 tok/s against 372.9 (+9%), in line 376.0 against 367.8, depth 1 within the runs' spread (results/depth-branch-s29); the same bits
	attAliasKV      bool   // a diagnostic for benchmarks only, which changes tokens: captured steps' attention reads layer 0's K/V cache in every layer (the same bytes a step over 1/layers of the footprint: do the deep reads cost through L2 traffic or through the pages they touch?)
	attTrace        bool   // captured steps' attention runs as attention_trace_step, whose blocks record their residency, start, end and SM (step_att_trace.go; a measuring aid with no node in the graph; the same bits)
	attWindow       int    // a diagnostic for benchmarks only, which changes tokens: graph-full and -segmented steps' attention reads the first attWindow positions whatever the depth (a fixed state buffer in place of the step's), so a deep step keeps its KV cache, appends and RoPE but not attention's reads (BenchmarkDecodeDepth's -attw modes: does Qwen's shared-expert branch lose its gain at depth through those reads?)
	attPipe         bool   // captured steps' attention over an FP16 cache keeps the next round's K/V rows loading while a round computes (attention_pipe_step, with attPrefetch's rows; the same bits; session 25 on an H100: +1.3% on Qwen at depth 8,064 with 128 rows)
	attRing         bool   // captured steps' attention over an FP16 cache (hd <= 128, hd % 8 == 0) copies each warp's next two rounds of K/V rows into a shared-memory ring with cp.async while a round computes (attention_ring_step; the same bits; session 26 on an H100: 12-14% slower than attention_step alone at depths 2,048 and 8,064, results/h100-s26)
	noSharedDown    bool   // a shared expert's SiLU·up, down and gated residual run as three launches (silu_mul_f32, the matvec, add_gated_resid_step), not one shared_down_f16 (sharedDownFused)
	moeFlags        int    // experts_moe_int4_t's diagnostic flags (BenchmarkExperts only: 1 no prefetch, 2 no down, 4 no barrier)
	attnIn          bool   // captured steps run the q/k norm, RoPE and KV append inside the attention launch (attention_in_step; off by default: slower on the H200)
	downGlobal      bool   // grouped down kernels read the A activation vectors from global memory (_g: x' and chunk sums made on the fly) instead of staging them in shared memory
	routeIn         bool   // graph-full steps route inside the gate/up and down kernels (experts_routed.cu): no route_step launch
	routeInWait     bool   // with routeIn, the down kernel reads the group table gate/up's block 0 wrote, after its wait (the _t kernel, early off), instead of routing itself
	tcNoPreSplit    bool   // the tensor-core matmuls split activations in every row tile, not once per op (tc_split_rows, the default since session 18; the same bits)
	tcNoRing        bool   // the grouped int4 expert matmul of batched prefill runs the two-stage kernel, not its cp.async ring (12 slots, 11 chunks in flight a thread, m16 tiles of padding tokens alone skipped; the default since session 20: prefill 7-18% faster at 16-64 prompt tokens, results/h200-s20); the same bits (tcGroupedRing)
	tcRing2         bool   // the grouped int4 ring kernels stage two chunks a barrier (_ring2: one ring wait, barrier and activation round trip for every two chunks, 10 slots; the same bits): session 20 measured the ring loop at ~1.4 µs a chunk whatever the bytes in flight; off until measured
	noPrefillPDL    bool   // kernels launched op by op (a batched prefill's) are plain launches; by default they use programmatic dependent launch as a captured step's do: every kernel of matmul_tc, prefill_rows and prefill_attention calls grid_dep_enter first, so a launch may start while the kernel before it finishes (not after a graph or a copy: launchGraph); the same bits; the default since session 26 (+5-8% prompt tok/s at 64 tokens, +1-3% at 512 on an H100: results/h100-s26)
	noRouteDevice   bool   // a batched prefill at full residency reads each layer's routing back to the host (the path before session 25) instead of keeping it on the device (backend.DeviceRouting, routed.go: no read back of the top-k before the layer's expert matmuls, the leases counted a layer behind; the same bits, counters and trace). The device routing is the default: prompt tok/s +9-17% at 64, 512 and 2,048 tokens on both shapes (results/h100-s25)
	tcFDSplitK      bool   // an FP16 split-K matmul (the dense projections of a short prompt, Qwen's shared expert) runs the fragment-direct twin (matmul_tc_f16_pre_splitk_fd: weights loaded straight into B fragments, the pre-split activations staged 4 chunks a barrier; the same partials and bits); off until measured
	tcFD16S3        bool   // the small-entry fragment-direct kernels (and their gate|up build) stage each slice of activations two slices ahead (matmul_tc_grouped_pre_fd16_s3_w4a16, _gu_s3: three stages, 26 KB; the barrier at a slice waits on a copy issued two slices before; the same bits: fd16Kernel)
	tcA16           bool   // the fragment-direct grouped int4 kernels and their gate|up builds take the activations in FP16 (each chunk's sums from the pre-split's hi halves alone, at the chunk's shift: W4A16 with FP32 accumulation; matmul_tc_grouped_pre_fd(16)(_gu)_a16_w4a16: half the mma, ldmatrix and staging), for every int4 launch (the ring has no FP16 build: tcGroupedFD). A measurement knob of issues 14/15, off: other bits than every other mode's (within FP16's rounding of each activation), so not a declared mode yet
	tcA16Row        bool   // like tcA16 (and before it), with one shift a token row instead of one a 32-value chunk (tc_split_rows_a16r, then matmul_tc_grouped_pre_fd(16)(_gu)_a16r_w4a16): a scale block's 8 chunks accumulate in the mma's FP32 sums, the block scale once a block, 2^-s once an output; other bits again (an activation far below its row's largest keeps fewer bits)
	tcA16Dense      bool   // the burst split-K twin (the FP16 projections where a block holds at least tcBurstMinChunks chunks: 256 prompt tokens and more) takes the activations in FP16 (matmul_tc_f16_pre_splitk_burst_a16: hi halves alone, half the mma and staging); a measurement knob beside tcA16, off: other bits
	tcSplitGoal     int    // the blocks a split-K FP16 matmul aims for instead of tcSplitGoal (0: that): a measurement knob, fewer splits of more chunks each (the burst twin from 8 chunks a block) and fewer partials; other bits (a sum's order follows the split count)
	noAttnInRows    bool   // a batched prefill runs its q/k norms, RoPE and KV append as separate ops (RMSNorm twice, RoPERows twice, KVAppendRows: 5 launches, or 4 and two copies into an FP32 cache) instead of one QKRoPEKVRows launch (qk_norm_rope_kv_rows or rope_kv_rows: the decode step's bodies over the rows; the same bits)
	noTopKWarp      bool   // a batched prefill's top-k runs router_topk_rows (a block a row: k rounds of two block barriers) instead of router_topk_rows_warp (a warp a row, route_step's selection; the same ids and weights: topKRowsWarp)
	tcNoGateUp      bool   // a device-routed prefill's gate and up run as two grouped launches and SiLUMul (RoutedGateUp's three ops), not the gate|up build of the fragment-direct kernels (matmul_tc_grouped_pre_fd(16)_gu_w4a16: both matrices and silu_mul in one launch on one pre-split, warps 0-3 the gate's rows, 4-7 the up's, over the same staged activations; the same bits: routedGateUpKernel)
	tcNoBurst       bool   // an FP16 split-K matmul runs the two-stage kernel (matmul_tc_f16_splitk: one chunk's loads in flight while the one before is computed), not the burst twin, the default since session 32 (matmul_tc_f16_pre_splitk_burst: a block's chunks copied into 5 stages with cp.async, up to 4 in flight together, on the pre-split activations; columns a multiple of 8; the same partials and bits: tcDenseBurst)
	noPartsFused    bool   // MatMulParts (a batched prefill's fused q|k|v projection) runs three MatMuls (two launches each) instead of one split-K launch and one reduce into the three outputs where partsSplit allows (the default since session 32, measured with the burst twin: tcDenseBurst); the same bits
	noAttTC         bool   // a batched prefill's attention over an FP16 cache runs the tiled FP32 kernel instead of the tensor cores' (attention_tc_rows_kv16, the default since session 35: 64 queries a block, flash-attention style; the queries and probabilities as FP16 hi and lo halves, K and V exact; attnTC); other bits
	attTiled32      bool   // a batched prefill's attention (AttentionRows) runs the 32-query tiled kernel (attention_tiled32_rows_f32: each K and V value read from shared memory serves 4 queries of a warp, not 2); the same bits as the 16-query kernel (a row's arithmetic is fixed by its position); off until measured
	tcFDAlways      bool   // every grouped int4 launch with pre-split activations runs the fragment-direct kernel (matmul_tc_grouped_pre_fd_w4a16), not only those tcGroupedFD picks
	tcNoFD          bool   // no grouped launch runs the fragment-direct kernel (the int4 ring instead)
	tcNoFD16        bool   // no grouped launch runs the small-entry build of the fragment-direct kernel (matmul_tc_grouped_pre_fd16_w4a16: one m16 tile, 80 registers and 17.5 KB of staging, three blocks an SM instead of two; tcGroupedFD16, which cuts the table's entries at 16 pairs where the pairs average at most 16 an expert); the same bits. The small-entry build is the default: at 64 prompt tokens 75 against 81 µs a launch on the H100 (ncu) and prompt tok/s +2-10% (OLMoE) and +7-9% (Qwen1.5-MoE) in two runs (results/prefill-s31)
	tcNarrow        bool   // a grouped int4 ring launch whose entries all hold at most 32 pairs (a short prompt's experts) runs the narrow twins: all 8 warps on a block's first 32 tokens, 2 n8 tiles each, where the default mapping idles the 4 warps of tokens 32..63 (tcGroupedNarrow; the same bits; off until measured)
	tcRingF16       bool   // batched prefill's FP16 tensor-core projections (split-K and pre-split) stream their matrix through a 6-slot cp.async ring; the same bits; off: 10-21% slower on Qwen's shared expert from 64 tokens on (results/h200-s20; tcDenseRing)
	tcNoSplitK      bool   // an FP16 batched matmul of too few blocks to fill the GPU runs unsplit (split along its columns by tcSplit is the default since session 18)
	waitPrefetch    uint32 // bytes of weight rows each FP16 matvec warp asks L2 for before its dependency wait (matvec_f16.cu hz_wait_prefetch, written by setTuning; 0, the default: none; the same bits; measured 3-12% slower at 8-128 KB, results/h200-s19)
	tcDecode        int    // captured steps run the int4 grouped experts on the tensor cores (experts_tc.cu): 1 + an index into tcDecodeVariants; 0: off, the default (other bits; an experiment of issue 14)
	noMatmulTC      bool   // the batched ops run on the row kernels only (matmul.cu: token-at-a-time prefill's bits), never on the tensor cores (matmul_tc.cu, the default: tcMatmul, tcExperts)
	timeline        bool   // graph-full steps record a device event after every body instruction and at the end of each shared-expert branch (step_timeline.go; the kernel after an event is a plain launch, so read it with noPDL; a measuring aid, the same bits)
}

// smemStaticRoom is the shared memory smemMax leaves below the opt-in
// limit for a kernel's static shared memory (the persistent kernel, which
// has more, gets its own limit: persistentSmem).
const smemStaticRoom = 1024

// mappedBuf is pinned host memory kernels write directly.
type mappedBuf struct {
	p   unsafe.Pointer
	dev cu.DevicePtr
	n   int
	ok  bool // allocated and passed the probe at Open
}

func (m mappedBuf) bytes() []byte { return unsafe.Slice((*byte)(m.p), m.n) }

// ResultPath says how TopK and Argmax get their results to the host:
// "mapped" (the kernel writes pinned host memory directly) or "copy".
func (b *Backend) ResultPath() string {
	if b.results.ok {
		return "mapped"
	}
	return "copy"
}

func (b *Backend) setup() error {
	if err := checkHandleLayout(); err != nil {
		return err
	}
	dev, err := cu.GetDevice(b.ordinal)
	if err != nil {
		return fmt.Errorf("get device: %w", err)
	}
	b.dev = dev
	if b.name, err = dev.Name(); err != nil {
		return fmt.Errorf("device name: %w", err)
	}
	// Spin-wait synchronisation and mapped pinned memory; an already active
	// primary context keeps its flags, which only costs latency.
	_ = setPrimaryFlags(dev)
	if b.ctx, err = dev.RetainPrimaryCtx(); err != nil {
		return fmt.Errorf("retain primary context: %w", err)
	}
	if err := cu.SetCurrentContext(b.ctx); err != nil {
		return fmt.Errorf("make context current: %w", err)
	}
	// The driver reserves the per-thread stack for every thread the GPU can
	// hold (1 KiB by default: 1 KiB x 2048 threads x 132 SMs = 264 MiB on
	// an H200). Our kernels' frames are at most 48 bytes (ptxas -v, sm_90),
	// and the driver grows the stack for a launch that needs more.
	if err := cu.SetLimit(cu.StackSize, threadStackBytes); err != nil {
		return fmt.Errorf("set the per-thread stack to %d bytes: %w", threadStackBytes, err)
	}
	if b.sms, err = dev.Attribute(cu.MultiprocessorCount); err != nil {
		return fmt.Errorf("multiprocessor count: %w", err)
	}
	if b.smemMax, err = dev.Attribute(cu.DeviceAttribute(attrSmemOptin)); err != nil {
		return fmt.Errorf("shared memory opt-in limit: %w", err)
	}
	b.smemMax -= smemStaticRoom // room for the kernels' static shared memory
	if b.compute, err = cu.MakeStream(cu.NonBlocking); err != nil {
		return fmt.Errorf("compute stream: %w", err)
	}
	if b.copy, err = cu.MakeStream(cu.NonBlocking); err != nil {
		return fmt.Errorf("copy stream: %w", err)
	}
	if err := b.loadKernels(); err != nil {
		return err
	}
	if b.ring, err = newUploadRing(64, 64<<10); err != nil {
		return fmt.Errorf("upload ring: %w", err)
	}
	if b.readback, err = newPinned(1 << 20); err != nil {
		return fmt.Errorf("readback buffer: %w", err)
	}
	if b.small, err = cu.MemAlloc(smallBytes); err != nil {
		return fmt.Errorf("result buffer: %w", err)
	}
	b.occ = map[occKey]int{}
	b.setupMappedResults()
	return nil
}

// setupMappedResults allocates the mapped result buffer and checks, with a
// one-thread kernel store and a stream sync, that the host sees what a
// kernel writes there. Any failure leaves results.ok false: TopK and Argmax
// then copy their results back as before.
func (b *Backend) setupMappedResults() {
	p, d, err := hostAllocMapped(smallBytes)
	if err != nil {
		return
	}
	m := mappedBuf{p: p, dev: d, n: smallBytes}
	const probe = 0x5A17C0DE
	clear(m.bytes())
	ok := b.launch(b.k.probeStore, 1, 1, 0, argPtr(d), argInt(probe)) == nil &&
		b.compute.Synchronize() == nil &&
		atomic.LoadInt32((*int32)(p)) == probe
	if !ok {
		_ = hostFree(p)
		return
	}
	m.ok = true
	b.results = m
}

func (b *Backend) teardown() error {
	errs := []error{b.compute.Synchronize(), b.copy.Synchronize()}
	if b.ring != nil {
		errs = append(errs, b.ring.free())
	}
	errs = append(errs, b.readback.free())
	if b.results.ok {
		errs = append(errs, hostFree(b.results.p))
		b.results = mappedBuf{}
	}
	for _, p := range []cu.DevicePtr{b.small, b.masked, b.idx} {
		if p != 0 {
			errs = append(errs, cu.MemFree(p))
		}
	}
	if b.fusedAct != nil {
		errs = append(errs, cu.MemFree(b.fusedAct.ptr))
	}
	errs = append(errs, b.freeRoutes()...)
	for _, t := range []*Tensor{b.attPart, b.attCnt, b.attRowsPart, b.attRowsCnt, b.topkRows, b.combW, b.tcPart, b.tcSplitBuf, b.a16Rows} {
		if t != nil {
			errs = append(errs, cu.MemFree(t.ptr))
		}
	}
	for i := range b.events {
		errs = append(errs, cu.DestroyEvent(&b.events[i]))
	}
	for _, m := range b.mods {
		errs = append(errs, m.Unload())
	}
	errs = append(errs, b.compute.Destroy(), b.copy.Destroy(), b.dev.ReleasePrimaryCtx())
	return errors.Join(errs...)
}

// ---------------------------------------------------------------------------
// Tensors.

// Tensor is a device buffer owned by a Backend.
type Tensor struct {
	ptr   cu.DevicePtr
	n     int
	dt    backend.DType
	bytes int // allocated size (n * element size rounded up to 128)
	b     *Backend
	freed atomic.Bool
	view  bool // a View of another tensor's memory: never freed on its own
}

// Len implements backend.Tensor.
func (t *Tensor) Len() int { return t.n }

// DType implements backend.Tensor.
func (t *Tensor) DType() backend.DType { return t.dt }

// Ptr is the device address (for tests and benchmarks).
func (t *Tensor) Ptr() uintptr { return uintptr(t.ptr) }

func elemSize(dt backend.DType) int {
	switch dt {
	case backend.F32:
		return 4
	case backend.F16:
		return 2
	}
	return 1
}

// allocGranule: every allocation is rounded up to 32 FP32 values and zeroed,
// so a kernel reading a vector in whole 32-value chunks never leaves the
// allocation and reads zeros past its end.
const allocGranule = 128

func shapeErr(op string, format string, args ...any) error {
	return fmt.Errorf("cuda: %s: %s: %w", op, fmt.Sprintf(format, args...), backend.ErrShape)
}

// tensorOf checks that t is a live tensor of this backend with one of the
// given dtypes.
func (b *Backend) tensorOf(op, what string, t backend.Tensor, dts ...backend.DType) (*Tensor, error) {
	ct, ok := t.(*Tensor)
	if !ok || ct == nil {
		return nil, fmt.Errorf("cuda: %s %s: not a CUDA tensor (%T)", op, what, t)
	}
	if ct.b != b {
		return nil, fmt.Errorf("cuda: %s %s: tensor of another backend", op, what)
	}
	if ct.freed.Load() {
		return nil, fmt.Errorf("cuda: %s %s: use after free", op, what)
	}
	for _, dt := range dts {
		if ct.dt == dt {
			return ct, nil
		}
	}
	return nil, fmt.Errorf("cuda: %s %s: dtype %v, want %v", op, what, ct.dt, dts)
}

// alloc allocates and zeroes a tensor; owner thread only.
func (b *Backend) alloc(n int, dt backend.DType) (*Tensor, error) {
	size := (n*elemSize(dt) + allocGranule - 1) / allocGranule * allocGranule
	if size == 0 {
		size = allocGranule
	}
	p, err := cu.MemAlloc(int64(size))
	if err != nil {
		return nil, fmt.Errorf("cuda: allocate %d bytes: %w", size, err)
	}
	// Zero on the compute stream and wait: an expert row is next written
	// by the copy stream, which must not race the memset.
	if err := cu.MemsetD8Async(p, 0, int64(size), b.compute); err != nil {
		_ = cu.MemFree(p)
		return nil, fmt.Errorf("cuda: zero %d bytes: %w", size, err)
	}
	if err := b.compute.Synchronize(); err != nil {
		return nil, fmt.Errorf("cuda: zero %d bytes: %w", size, err)
	}
	return &Tensor{ptr: p, n: n, dt: dt, bytes: size, b: b}, nil
}

// scratch makes *t an F32 buffer of at least n zeroed values, replacing a
// smaller one once the work queued on the compute stream has finished with
// it. Owner thread only.
func (b *Backend) scratch(t **Tensor, n int) error {
	if *t != nil && (*t).n >= n {
		return nil
	}
	if *t != nil {
		if err := b.compute.Synchronize(); err != nil {
			return err
		}
		if err := cu.MemFree((*t).ptr); err != nil {
			return err
		}
		*t = nil
	}
	nt, err := b.alloc(n, backend.F32)
	if err != nil {
		return err
	}
	*t = nt
	return nil
}

func (b *Backend) allocSync(n int, dt backend.DType) (*Tensor, error) {
	if n < 0 {
		return nil, fmt.Errorf("cuda: allocate %d %v values: negative size", n, dt)
	}
	var t *Tensor
	err := b.o.do(func() (err error) {
		t, err = b.alloc(n, dt)
		return err
	})
	return t, err
}

// UploadF16 implements backend.Backend; the values stay FP16 on the device.
func (b *Backend) UploadF16(data []uint16) (backend.Tensor, error) {
	t, err := b.allocSync(len(data), backend.F16)
	if err != nil {
		return nil, err
	}
	if len(data) == 0 {
		return t, nil
	}
	err = b.o.do(func() error { return b.copyIn(t.ptr, unsafe.Pointer(&data[0]), 2*len(data)) })
	if err != nil {
		return nil, fmt.Errorf("cuda: upload %d FP16 values: %w", len(data), err)
	}
	return t, nil
}

// AllocBytes implements backend.Backend.
func (b *Backend) AllocBytes(n int) (backend.Tensor, error) { return b.allocSync(n, backend.Bytes) }

// Alloc implements backend.Backend.
func (b *Backend) Alloc(n int) (backend.Tensor, error) { return b.allocSync(n, backend.F32) }

// AllocF16 implements backend.Backend: binary16 values (the FP16 KV cache).
func (b *Backend) AllocF16(n int) (backend.Tensor, error) { return b.allocSync(n, backend.F16) }

// WriteBytes implements backend.Backend. The copy is ordered on the compute
// stream after every op issued before it; src may be reused on return.
func (b *Backend) WriteBytes(dst backend.Tensor, off int, src []byte) error {
	d, err := b.tensorOf("WriteBytes", "dst", dst, backend.Bytes)
	if err != nil {
		return err
	}
	if off < 0 || off+len(src) > d.n {
		return shapeErr("WriteBytes", "write [%d,%d) outside buffer of %d bytes", off, off+len(src), d.n)
	}
	return b.upload(d.ptr+cu.DevicePtr(off), src)
}

// WriteF32 implements backend.Backend.
func (b *Backend) WriteF32(dst backend.Tensor, src []float32) error {
	d, err := b.tensorOf("WriteF32", "dst", dst, backend.F32)
	if err != nil {
		return err
	}
	if d.n != len(src) {
		return shapeErr("WriteF32", "dst has %d elements, src %d", d.n, len(src))
	}
	if len(src) == 0 {
		return nil
	}
	return b.upload(d.ptr, unsafe.Slice((*byte)(unsafe.Pointer(&src[0])), 4*len(src)))
}

// upload copies host bytes to the device on the compute stream. Small
// copies go through the pinned upload ring and return without waiting;
// large ones are copied from src by the driver before upload returns.
func (b *Backend) upload(dst cu.DevicePtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	if len(src) <= b.ring.slotBytes {
		buf := append([]byte(nil), src...)
		return b.o.async(func() error { return b.ring.upload(b.compute, dst, buf) })
	}
	return b.o.do(func() error { return b.copyIn(dst, unsafe.Pointer(&src[0]), len(src)) })
}

// copyIn copies n bytes of (pageable) host memory to the device in compute
// stream order and waits for the copy, so the caller may reuse src at once
// whatever the driver does with pageable memory; owner thread only. Used for
// weights and records at load time, where the wait costs nothing.
func (b *Backend) copyIn(dst cu.DevicePtr, src unsafe.Pointer, n int) error {
	if err := cu.MemcpyHtoDAsync(dst, src, int64(n), b.compute); err != nil {
		return err
	}
	return b.compute.Synchronize()
}

// ReadF32 implements backend.Backend; it waits for the compute stream.
func (b *Backend) ReadF32(src backend.Tensor, dst []float32) error {
	s, err := b.tensorOf("ReadF32", "src", src, backend.F32, backend.F16)
	if err != nil {
		return err
	}
	if len(dst) != s.n {
		return shapeErr("ReadF32", "dst has %d elements, src %d", len(dst), s.n)
	}
	if len(dst) == 0 {
		return nil
	}
	return b.o.do(func() error {
		if s.dt == backend.F16 { // an FP16 buffer (the KV cache): its values, exactly
			host, err := b.read(s.ptr, 2*len(dst))
			if err != nil {
				return fmt.Errorf("cuda: ReadF32: %w", err)
			}
			for i := range dst {
				dst[i] = half.F16ToF32(uint16(host[2*i]) | uint16(host[2*i+1])<<8)
			}
			return nil
		}
		host, err := b.read(s.ptr, 4*len(dst))
		if err != nil {
			return fmt.Errorf("cuda: ReadF32: %w", err)
		}
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&dst[0])), 4*len(dst)), host)
		return nil
	})
}

// read copies n bytes from the device into the pinned readback buffer after
// all queued compute work and returns that buffer; owner thread only.
func (b *Backend) read(src cu.DevicePtr, n int) ([]byte, error) {
	if n > b.readback.n {
		if err := b.readback.free(); err != nil {
			return nil, err
		}
		var err error
		if b.readback, err = newPinned(n); err != nil {
			return nil, err
		}
	}
	if err := cu.MemcpyDtoHAsync(b.readback.p, src, int64(n), b.compute); err != nil {
		return nil, err
	}
	if err := b.compute.Synchronize(); err != nil {
		return nil, err
	}
	return b.readback.bytes()[:n], nil
}

// Free implements backend.Backend. It waits for queued work that may still
// use the tensor.
func (b *Backend) Free(t backend.Tensor) error {
	ct, ok := t.(*Tensor)
	if !ok || ct == nil || ct.b != b {
		return fmt.Errorf("cuda: Free: not a tensor of this backend (%T)", t)
	}
	if ct.view {
		return fmt.Errorf("cuda: Free: a view is freed with the tensor it views")
	}
	if !ct.freed.CompareAndSwap(false, true) {
		return fmt.Errorf("cuda: double free")
	}
	return b.o.do(func() error {
		if err := b.compute.Synchronize(); err != nil {
			return err
		}
		if err := b.copy.Synchronize(); err != nil {
			return err
		}
		return cu.MemFree(ct.ptr)
	})
}

// Synchronize waits until every op issued so far has completed and returns
// the first error an asynchronous op met.
func (b *Backend) Synchronize() error {
	return b.o.do(func() error { return b.compute.Synchronize() })
}

// ---------------------------------------------------------------------------
// Pinned host memory.

type pinned struct {
	p unsafe.Pointer
	n int
}

func newPinned(n int) (pinned, error) {
	p, err := hostAlloc(n)
	if err != nil {
		return pinned{}, err
	}
	return pinned{p: p, n: n}, nil
}

func (p pinned) bytes() []byte { return unsafe.Slice((*byte)(p.p), p.n) }

func (p *pinned) free() error {
	if p.p == nil {
		return nil
	}
	err := hostFree(p.p)
	p.p, p.n = nil, 0
	return err
}

// uploadRing stages small host-to-device copies in pinned memory so that
// they are truly asynchronous: a copy from pageable memory may make the
// driver wait for the stream. Slot i is reused only after the event
// recorded behind its previous copy completed.
type uploadRing struct {
	mem       pinned
	slotBytes int
	events    []cu.Event
	used      []bool
	next      int
}

func newUploadRing(slots, slotBytes int) (*uploadRing, error) {
	mem, err := newPinned(slots * slotBytes)
	if err != nil {
		return nil, err
	}
	r := &uploadRing{mem: mem, slotBytes: slotBytes, events: make([]cu.Event, slots), used: make([]bool, slots)}
	for i := range r.events {
		if r.events[i], err = cu.MakeEvent(cu.DisableTiming); err != nil {
			return nil, errors.Join(err, r.free())
		}
	}
	return r, nil
}

func (r *uploadRing) upload(s cu.Stream, dst cu.DevicePtr, src []byte) error {
	if len(src) > r.slotBytes {
		return fmt.Errorf("upload ring: %d bytes exceed a %d-byte slot", len(src), r.slotBytes)
	}
	i := r.next
	r.next = (i + 1) % len(r.events)
	if r.used[i] {
		if err := r.events[i].Synchronize(); err != nil {
			return fmt.Errorf("upload ring slot %d: %w", i, err)
		}
	}
	slot := r.mem.bytes()[i*r.slotBytes : (i+1)*r.slotBytes]
	copy(slot, src)
	if err := cu.MemcpyHtoDAsync(dst, unsafe.Pointer(&slot[0]), int64(len(src)), s); err != nil {
		return err
	}
	r.used[i] = true
	return r.events[i].Record(s)
}

func (r *uploadRing) free() error {
	var errs []error
	for i := range r.events {
		if r.events[i] != (cu.Event{}) {
			errs = append(errs, cu.DestroyEvent(&r.events[i]))
		}
	}
	errs = append(errs, r.mem.free())
	return errors.Join(errs...)
}
