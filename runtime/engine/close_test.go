package engine

import (
	"fmt"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/cache"
	"github.com/horizon-runmap/horizon/runtime/cpu"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// countingBackend is the CPU backend counting the tensors it allocated and
// has not freed (views are not counted: they are freed with what they view).
type countingBackend struct {
	*cpu.Backend
	live int
}

func (c *countingBackend) count(t backend.Tensor, err error) (backend.Tensor, error) {
	if err == nil {
		c.live++
	}
	return t, err
}

func (c *countingBackend) UploadF16(d []uint16) (backend.Tensor, error) {
	return c.count(c.Backend.UploadF16(d))
}
func (c *countingBackend) AllocBytes(n int) (backend.Tensor, error) {
	return c.count(c.Backend.AllocBytes(n))
}
func (c *countingBackend) Alloc(n int) (backend.Tensor, error) { return c.count(c.Backend.Alloc(n)) }
func (c *countingBackend) AllocF16(n int) (backend.Tensor, error) {
	return c.count(c.Backend.AllocF16(n))
}
func (c *countingBackend) Free(t backend.Tensor) error {
	err := c.Backend.Free(t)
	if err == nil {
		c.live--
	}
	return err
}

// TestCloseFreesEverything: after a request, Loaded.Close and the cache
// device's Close leave no tensor a load allocated (weights, fused weights,
// KV cache, activations, the batched prefill's buffers, the prefetch
// logits, the executor's scratch, the expert rows): a process that loads
// engines one after another on one device does not run out of memory. A
// load that fails after the weights were uploaded frees them too.
func TestCloseFreesEverything(t *testing.T) {
	for _, arch := range []string{"olmoe-tiny", "qwen2moe-tiny"} {
		for _, o := range []LoadOptions{
			{Executor: "scalar-v1"},
			{Executor: "grouped-v1", Prefill: PrefillBatched, Capacity: 6},
			{Executor: "grouped-v1", Prefetch: PrefetchNextLayer, KV: "fp16"},
		} {
			t.Run(fmt.Sprintf("%s/%s-%s-%s", arch, o.Executor, o.Prefill, o.Prefetch), func(t *testing.T) {
				be := &countingBackend{Backend: cpu.New(1)}
				dev := cache.NewCPUDevice(be)
				l, err := Load(be, dev, testArtifact(t, arch, qpack.SchemeInt4), o)
				if err != nil {
					t.Fatal(err)
				}
				if be.live == 0 {
					t.Fatal("the load allocated nothing the test counted")
				}
				if _, err := l.Generate(Request{Prompt: []int{3, 9, 27, 81, 5}, Tokens: 4, SuppressEOS: true}); err != nil {
					t.Fatal(err)
				}
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				if err := dev.Close(); err != nil {
					t.Fatal(err)
				}
				if be.live != 0 {
					t.Fatalf("%d tensors still allocated after Close", be.live)
				}
			})
		}
	}
	t.Run("failed load", func(t *testing.T) {
		be := &countingBackend{Backend: cpu.New(1)}
		dev := cache.NewCPUDevice(be)
		defer dev.Close()
		// The CPU backend has no captured steps: Load fails after the
		// weights, the executor, the cache and the engine exist.
		if _, err := Load(be, dev, testArtifact(t, "olmoe-tiny", qpack.SchemeInt4), LoadOptions{Executor: "grouped-v1", StepMode: StepGraphFull}); err == nil {
			t.Fatal("a captured step mode loaded on the CPU backend")
		}
		if be.live != 0 {
			t.Fatalf("%d tensors still allocated after a failed load", be.live)
		}
	})
}
