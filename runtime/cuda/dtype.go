//go:build cuda

package cuda

// ActivationDType implements backend.Backend: activations live on the
// device in FP32 (weights stay FP16 or qpack INT4).
func (b *Backend) ActivationDType() string { return "FP32" }
