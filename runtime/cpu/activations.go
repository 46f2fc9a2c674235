package cpu

import (
	"fmt"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/half"
)

var _ backend.ExpertActivations = (*Backend)(nil)

// SetExpertActivations implements backend.ExpertActivations: with F16,
// ExpertMatMul (and so ExpertMatMulGroup and the device-routing ops built on
// it) rounds each gathered activation row of an INT4 matrix with
// half.RowShiftF16 before its FP32 dot products, the reference of the CUDA
// backend's row-shift FP16 expert kernels. FP16 expert matrices keep FP32
// activations (the CUDA backend has no FP16-activation build of them; the
// engine refuses the combination).
func (b *Backend) SetExpertActivations(dt backend.DType) error {
	switch dt {
	case backend.F32:
		b.expertAct16 = false
	case backend.F16:
		b.expertAct16 = true
	default:
		return fmt.Errorf("cpu: expert activations %v: want F32 or F16", dt)
	}
	return nil
}

var _ backend.DenseActivations = (*Backend)(nil)

// MatMulA16 implements backend.DenseActivations: MatMul on a copy of x
// whose rows are rounded with half.ChunkShiftF16, the reference of the
// CUDA backend's FP16-activation tensor-core projections. x is left as it
// is (the router reads the same normalised rows in FP32).
func (b *Backend) MatMulA16(dst, w, x, bias backend.Tensor, T int) error {
	xs, err := f32s("MatMulA16 x", x)
	if err != nil {
		return err
	}
	if T <= 0 || len(xs)%T != 0 {
		return shapeErr("MatMulA16", "x %d values for %d tokens", len(xs), T)
	}
	cols := len(xs) / T
	xr := &vec{data: append([]float32(nil), xs...), dt: backend.F32}
	for t := 0; t < T; t++ {
		half.ChunkShiftF16(xr.data[t*cols : (t+1)*cols])
	}
	return b.MatMul(dst, w, xr, bias, T)
}
