package cpu

import (
	"fmt"

	"github.com/horizon-runmap/horizon/runtime/backend"
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
