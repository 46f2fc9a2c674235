//go:build cuda

package cuda

import (
	"fmt"

	"gorgonia.org/cu"

	"github.com/horizon-runmap/horizon/runtime/backend"
)

var _ backend.ExpertActivations = (*Backend)(nil)

// SetExpertActivations implements backend.ExpertActivations. F16 runs every
// INT4 grouped expert launch of a batched prefill on the row-shift FP16
// builds, as the measurement knob tuning.tcA16Row does (a16Row:
// tc_split_rows_a16r rounds each token row as half.RowShiftF16 does, then
// matmul_tc_grouped_pre_fd(16)(_gu)_a16r_w4a16 multiply the FP16 rows, FP32
// sums); F32 runs the FP32 builds (the activations' hi and lo halves) unless
// the knob is set. The row-shift builds also make every INT4 grouped launch
// the fragment-direct kernel (tcGroupedFD: the ring has no FP16 build).
// Decode steps do not read it.
func (b *Backend) SetExpertActivations(dt backend.DType) error {
	if dt != backend.F32 && dt != backend.F16 {
		return fmt.Errorf("cuda: expert activations %v: want F32 or F16", dt)
	}
	return b.o.do(func() error {
		b.expertAct16 = dt == backend.F16
		return nil
	})
}

// a16Row says whether the INT4 grouped expert launches run the row-shift
// FP16 builds: the declared FP16 expert activations or tuning.tcA16Row.
// Owner thread.
func (b *Backend) a16Row() bool { return b.expertAct16 || b.tune.tcA16Row }

var (
	_ backend.DenseActivations = (*Backend)(nil)
	_ backend.PartMatMulsA16   = (*Backend)(nil)
)

// MatMulA16 implements backend.DenseActivations: MatMul on x's rows rounded
// to FP16 at one shift a 32-value chunk (half.ChunkShiftF16), as matmulA16
// runs it. x is left as it is.
func (b *Backend) MatMulA16(dst, w, x, bias backend.Tensor, T int) error {
	return b.matMulOp("MatMulA16", dst, w, x, bias, T, true)
}

// MatMulPartsA16 implements backend.PartMatMulsA16: MatMulParts on the
// rounded rows, each block's bits MatMulA16's.
func (b *Backend) MatMulPartsA16(dsts []backend.Tensor, rows []int, w, x, bias backend.Tensor, T int) error {
	return b.matMulPartsOp("MatMulPartsA16", dsts, rows, w, x, bias, T, true)
}

// a16Direct is the kernel-choice predicate of the FP16-activation
// projections (MatMulA16): a T-token matmul of the FP16 matrix mat with
// cols columns multiplies the chunk-shift FP16 activations directly where
// it runs on the tensor cores (tcMatmul) with the pre-split and the burst
// twin on and the burst twin can read the matrix (columns a multiple of 8,
// the matrix 16-byte aligned): split-K on the FP16 builds
// (splitKPartialsA16: the hi halves alone, half the mma of the FP32 path),
// unsplit on the pre-split kernel with tc_split_rows_a16c's zero lo
// halves. Otherwise the rows are rounded in FP32 first
// (the same kernel's xr) and the FP32 path multiplies them, whatever
// kernel it picks. Either way each value is hi·2^-s, so the two give the
// same products (the emulator's mmtc checks the kernels bit for bit on
// both); the choice depends on T and the shapes alone, so a capacity,
// wave or step mode cannot change a token's results.
func (b *Backend) a16Direct(mat cu.DevicePtr, cols, T int) bool {
	return b.tcMatmul(T) && !b.tune.tcNoPreSplit && !b.tune.tcNoBurst && cols%8 == 0 && mat%16 == 0
}

// matmulA16 is matmul of the FP16 matrix mat on x's T rows rounded to FP16
// at one shift a chunk (a16Direct picks how); owner thread only.
func (b *Backend) matmulA16(y, mat, x, bias cu.DevicePtr, biasKind, rows, cols, T int) error {
	if !b.a16Direct(mat, cols, T) {
		xr, err := b.roundRowsA16(x, T, cols)
		if err != nil {
			return err
		}
		return b.matmul(1, y, mat, xr, bias, biasKind, rows, cols, 0, 0, T, nil, nil)
	}
	if ks := b.tcSplit(T, rows, cols); ks > 1 {
		if err := b.splitKPartialsA16(mat, x, rows, cols, T, ks); err != nil {
			return err
		}
		return b.launch(b.k.splitKReduce, b.elementwiseGrid(T*rows), block, 0, argPtr(y), argPtr(b.tcPart.ptr), argInt(ks), argInt(T),
			argInt(rows), argPtr(bias), argInt(biasKind))
	}
	sp, err := b.tcPresplitA16(x, T, cols, true)
	if err != nil {
		return err
	}
	grid := (rows + tcRowTile - 1) / tcRowTile * ((T + tcTile - 1) / tcTile)
	b.tcLaunches++
	return b.launch(b.k.matmulTCPre[1], grid, tcThreads, tcSmem, argPtr(y), argPtr(mat), argPtr(sp.hi), argPtr(sp.lo),
		argPtr(sp.inv), argPtr(bias), argInt(biasKind), argInt(rows), argInt(cols), argInt(0), argInt(0),
		argInt(T), argPtr(0), argPtr(0))
}

// splitKPartialsA16 is splitKPartials on x's rows rounded to FP16 at one
// shift a chunk where a16Direct allows: the burst twin's FP16 build on the
// chunk-shift pre-split where tcDenseBurst picks the burst twin, else the
// two-stage kernel's FP16 build (matmul_tc_f16_splitk_a16, which splits x
// itself: at 16-64 tokens a 2,048-column projection's blocks hold 4 chunks,
// and the pre-split's launch cost more than the FP16 mma saved,
// results/s39); otherwise splitKPartials on the rows rounded in FP32. Owner
// thread only.
func (b *Backend) splitKPartialsA16(mat, x cu.DevicePtr, rows, cols, T, ks int) error {
	if !b.a16Direct(mat, cols, T) {
		xr, err := b.roundRowsA16(x, T, cols)
		if err != nil {
			return err
		}
		return b.splitKPartials(mat, xr, rows, cols, T, ks)
	}
	if err := b.scratch(&b.tcPart, ks*T*rows); err != nil {
		return fmt.Errorf("cuda: split-K partials: %w", err)
	}
	grid := (rows + tcRowTile - 1) / tcRowTile * ((T + tcTile - 1) / tcTile) * ks
	if !b.tcDenseBurst(mat, cols, ks) {
		// A block's share under the burst twin's bound: the two-stage
		// kernel's FP16 build splits x itself, so no pre-split launch (the
		// same partials: mmtc).
		b.tcLaunches++
		b.a16cInKernel++
		return b.launch(b.k.matmulTCSplitKA16, grid, tcThreads, tcSmem, argPtr(b.tcPart.ptr), argPtr(mat), argPtr(x), argInt(rows),
			argInt(cols), argInt(T), argInt(ks))
	}
	sp, err := b.tcPresplitA16(x, T, cols, false)
	if err != nil {
		return err
	}
	b.tcLaunches++
	return b.launch(b.k.matmulTCSplitKBurstA16, grid, tcThreads, tcSmemBurst, argPtr(b.tcPart.ptr), argPtr(mat), argPtr(sp.hi),
		argPtr(sp.hi), argPtr(sp.inv), argInt(rows), argInt(cols), argInt(T), argInt(ks))
}

// tcPresplitA16 is the chunk-shift FP16 pre-split of the nx rows of x
// [nx][cols] (tc_split_rows_a16c) into the pre-split scratch: hi and inv
// as tcPresplit's, lo zeros when zeroLo is set (for kernels that read lo),
// else not written (lo is hi: the burst twin's FP16 build reads none).
func (b *Backend) tcPresplitA16(x cu.DevicePtr, nx, cols int, zeroLo bool) (tcSplitX, error) {
	sp, grid, err := b.presplitBuf(nx, cols)
	if err != nil {
		return tcSplitX{}, fmt.Errorf("cuda: chunk-shift pre-split of %d rows: %w", nx, err)
	}
	lo := sp.lo
	if !zeroLo {
		sp.lo, lo = sp.hi, 0
	}
	b.a16cSplits++
	err = b.launch(b.k.tcSplitRowsA16C, grid, block, 0, argPtr(x), argInt(nx), argInt(cols), argPtr(sp.hi), argPtr(lo),
		argPtr(sp.inv), argPtr(0))
	return sp, err
}

// roundRowsA16 writes the nx rows of x [nx][cols] rounded to FP16 at one
// shift a chunk, as FP32 values (tc_split_rows_a16c's xr), into the
// backend's a16Rows scratch and returns its address; owner thread only.
func (b *Backend) roundRowsA16(x cu.DevicePtr, nx, cols int) (cu.DevicePtr, error) {
	if err := b.scratch(&b.a16Rows, nx*cols); err != nil {
		return 0, fmt.Errorf("cuda: FP16-rounded rows of %d tokens: %w", nx, err)
	}
	b.a16cRounds++
	nck := (cols + 31) / 32
	grid := min((4*nx*nck+block-1)/block, 2048)
	err := b.launch(b.k.tcSplitRowsA16C, grid, block, 0, argPtr(x), argInt(nx), argInt(cols), argPtr(0), argPtr(0), argPtr(0),
		argPtr(b.a16Rows.ptr))
	return b.a16Rows.ptr, err
}
