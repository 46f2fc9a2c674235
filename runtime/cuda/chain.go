//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// Issue 14's probe of a persistent decode step (kernels/chain.cu): a
// program of dependent FP16 matvecs run by one launch, one block an SM,
// each op waiting on a counter for the op it reads, while the block's ring
// of shared-memory pages keeps weight tiles copying. Its three strategies
// differ only in which tiles may copy ahead of a dependency wait, so
// BenchmarkChain can measure what a boundary costs when the next op's
// weights are already streaming (chainAcross), when only its first loads
// overlap (chainPDL, as a programmatic dependent launch), and when nothing
// does (chainPlain), against the launched matvec kernels on the same bytes.
// The engine does not use it.

// Strategies: kernels/chain.cu's CHAIN_PLAIN, CHAIN_PDL, CHAIN_ACROSS.
const (
	chainPlain  = 0
	chainPDL    = 1
	chainAcross = 2
)

// chain.cu's tile page (CHAIN_PAGE).
const chainPage = 32768

// chainKernel is one kernel of chain.cu: the same body with a ring of pages
// pages of page bytes, xmax staged x values (dynamic shared memory smem) and
// threads threads a block; or, perWarp, chain_matvec_f16_regs and _regs16
// (no shared memory: every warp streams its rows into registers, waits and
// signals on its own, rows of 256 to 2,048 columns, a multiple of 256, the
// across strategy only).
type chainKernel struct {
	name                             string
	pages, page, xmax, smem, threads int
	perWarp                          bool
}

func newChainKernel(name string, pages, page, xmax, threads int) chainKernel {
	return chainKernel{name: name, pages: pages, page: page, xmax: xmax, smem: pages*page + 4*xmax, threads: threads}
}

// chainBuilds are chain.cu's kernels, indexed by the chainS5.. constants.
var chainBuilds = [...]chainKernel{
	newChainKernel("chain_matvec_f16", 5, chainPage, 8192, 256),      // CHAIN_STAGES, CHAIN_XMAX, CHAIN_THREADS
	newChainKernel("chain_matvec_f16_s6", 6, chainPage, 4096, 256),   // CHAIN6_STAGES, CHAIN6_XMAX
	newChainKernel("chain_matvec_f16_t512", 5, chainPage, 8192, 512), // 2 * CHAIN_THREADS
	newChainKernel("chain_matvec_f16_p64", 3, 2*chainPage, 8192, 256),
	{name: "chain_matvec_f16_regs", xmax: 2048, threads: 256, perWarp: true},   // CHAIN_REGX * 256
	{name: "chain_matvec_f16_regs16", xmax: 2048, threads: 512, perWarp: true}, // x read again every row
}

// Indices into chainBuilds.
const (
	chainS5 = iota
	chainS6
	chainT512
	chainP64
	chainRegs
	chainRegs16
)

// chainOp is kernels/chain.cu's ChainOp: y[rows] = w[rows, cols] · x[cols]
// once every block has finished op dep (-1: none). An op with w == 0 is a
// latency op: one row, no x, spin nanoseconds on the block owning the row.
type chainOp struct {
	w, x, y    cu.DevicePtr // w: [rows, cols] FP16; x: [cols] FP32; y: [rows] FP32
	rows, cols int32
	dep        int32
	rpt        int32 // rows a tile; newChain sets it
	spin       int32
	excl       int32 // blocks at the grid's end that own none of this matvec's rows (1: the last block is kept for latency ops)
}

// chainProgram is a program uploaded for chain.cu: its ops, one done
// counter an op (then one an op and block, the per-warp builds' block
// counts), and the op counters' common value after the launches so far
// (never reset: a launch is passed it as base and waits for base + grid).
type chainProgram struct {
	ops, done *Tensor
	n, grid   int
	maxCols   int
	regsOK    bool // every matvec fits chain_matvec_f16_regs
	count     uint32
}

// newChain checks ops against chain.cu's limits and uploads them.
func (b *Backend) newChain(ops []chainOp) (*chainProgram, error) {
	if !b.k.chainOK {
		return nil, errChainSmem
	}
	if len(ops) == 0 {
		return nil, fmt.Errorf("chain probe: no ops")
	}
	ops = append([]chainOp(nil), ops...)
	for i := range ops {
		op := &ops[i]
		switch {
		case op.w == 0 && (op.rows != 1 || op.x != 0 || op.spin < 0):
			return nil, fmt.Errorf("chain probe: op %d: a latency op (no weights) has one row, no x and spin >= 0", i)
		case op.w != 0 && op.spin != 0:
			return nil, fmt.Errorf("chain probe: op %d: a matvec does not spin", i)
		case op.excl < 0 || op.excl > 1 || (op.w == 0 && op.excl != 0):
			return nil, fmt.Errorf("chain probe: op %d: excl %d: a matvec may leave the last block out (1), a latency op nothing", i, op.excl)
		case op.rows < 1 || op.cols < 8 || op.cols%8 != 0:
			return nil, fmt.Errorf("chain probe: op %d: %dx%d: want rows >= 1 and cols a positive multiple of 8", i, op.rows, op.cols)
		case int(op.cols) > chainBuilds[chainS5].xmax || 2*int(op.cols) > chainPage:
			return nil, fmt.Errorf("chain probe: op %d: %d columns: at most %d", i, op.cols, min(chainBuilds[chainS5].xmax, chainPage/2))
		case op.w%16 != 0:
			return nil, fmt.Errorf("chain probe: op %d: weights not 16-byte aligned", i)
		case op.dep >= int32(i) || op.dep < -1:
			return nil, fmt.Errorf("chain probe: op %d depends on op %d: want an earlier op or -1", i, op.dep)
		}
		op.rpt = int32(chainPage / (2 * int(op.cols)))
	}
	maxCols, regsOK := 0, true
	for _, op := range ops {
		maxCols = max(maxCols, int(op.cols))
		if op.w != 0 && (op.cols%256 != 0 || int(op.cols) > chainBuilds[chainRegs].xmax) {
			regsOK = false
		}
	}
	raw := unsafe.Slice((*byte)(unsafe.Pointer(&ops[0])), len(ops)*int(unsafe.Sizeof(chainOp{})))
	t, err := b.AllocBytes(len(raw))
	if err != nil {
		return nil, fmt.Errorf("chain probe: %w", err)
	}
	p := &chainProgram{ops: t.(*Tensor), n: len(ops), maxCols: maxCols, regsOK: regsOK}
	if err := b.WriteBytes(p.ops, 0, raw); err != nil {
		_ = b.Free(p.ops)
		return nil, fmt.Errorf("chain probe: %w", err)
	}
	counters := len(ops) * (1 + b.sms)
	d, err := b.AllocBytes(4 * counters)
	if err != nil {
		_ = b.Free(p.ops)
		return nil, fmt.Errorf("chain probe: %w", err)
	}
	p.done = d.(*Tensor)
	if err := b.WriteBytes(p.done, 0, make([]byte, 4*counters)); err != nil {
		_ = b.freeChain(p)
		return nil, fmt.Errorf("chain probe: %w", err)
	}
	err = b.o.do(func() error {
		// Every block must be resident at once: a block waits for the others.
		for i, cb := range chainBuilds {
			per, err := blocksPerSM(b.k.chain[i], cb.threads, cb.smem)
			if err != nil {
				return fmt.Errorf("chain probe %s: %w", cb.name, err)
			}
			if per != 1 {
				return fmt.Errorf("chain probe %s: %d resident blocks an SM, want one", cb.name, per)
			}
		}
		p.grid = b.sms
		return nil
	})
	if err != nil {
		_ = b.freeChain(p)
		return nil, err
	}
	return p, nil
}

// freeChain releases p's device memory.
func (b *Backend) freeChain(p *chainProgram) error {
	return errors.Join(b.Free(p.ops), b.Free(p.done))
}

// launchChain runs p once with strategy mode on the compute stream, on
// build kb (chainS5 .. chainRegs16); with trace != 0 (2·n·grid int64s) each
// block records its per-op wait and work cycles (chainRegs: its warp 0's).
// Owner thread.
func (b *Backend) launchChain(p *chainProgram, mode, kb int, trace cu.DevicePtr) error {
	cb := chainBuilds[kb]
	switch {
	case cb.perWarp && !p.regsOK:
		return fmt.Errorf("chain probe: %s takes rows of 256 to %d columns, a multiple of 256", cb.name, cb.xmax)
	case cb.perWarp && mode != chainAcross:
		return fmt.Errorf("chain probe: %s streams across every wait; strategy %d is not its own", cb.name, mode)
	case p.maxCols > cb.xmax && !cb.perWarp:
		return fmt.Errorf("chain probe: %d columns: %s stages at most %d", p.maxCols, cb.name, cb.xmax)
	}
	base := p.count
	p.count += uint32(p.grid)
	return b.launch(b.k.chain[kb], p.grid, cb.threads, cb.smem, argPtr(p.ops.ptr), argInt(p.n), argPtr(p.done.ptr), uint64(base), argInt(mode), argPtr(trace))
}

// errChainSmem: a chain.cu build's shared memory is over the device's limit.
var errChainSmem = errors.New("chain probe: its shared memory does not fit this device")
