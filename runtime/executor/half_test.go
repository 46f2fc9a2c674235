package executor

import "github.com/horizon-runmap/horizon/runtime/half"

func f16(h uint16) float32 { return half.F16ToF32(h) }
