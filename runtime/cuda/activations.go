//go:build cuda

package cuda

import (
	"fmt"

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
