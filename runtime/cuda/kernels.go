//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/horizon-runmap/horizon/kernels"
)

// nrChoices are the rows-per-warp variants compiled for each matvec; index
// i of a [3] array holds NR = nrChoices[i].
var nrChoices = [3]int{1, 2, 4}

// kernelSet holds every kernel the backend launches, looked up by name once
// at Open.
type kernelSet struct {
	matvecF16 [3][2]cu.Function // [NR index][0 shared x, 1 global x]
	matvecW4  [3][2]cu.Function
	gateup    [2][2]cu.Function // [0 int4, 1 fp16][0 shared, 1 global]
	down      [2][2]cu.Function
	rmsnorm   cu.Function
	siluMul   cu.Function
	add       cu.Function
	addScaled cu.Function
	addGated  cu.Function
	rope      cu.Function
	kvAppend  cu.Function
	attention cu.Function
	topk      cu.Function
	embed     cu.Function
	argmax    cu.Function
	spin      cu.Function
}

func (b *Backend) loadKernels() error {
	funcs := map[string]cu.Function{}
	for _, name := range kernels.Modules() {
		ptx, err := kernels.PTX(name)
		if err != nil {
			return err
		}
		m, err := cu.LoadData(ptx)
		if err != nil {
			return fmt.Errorf("load kernel module %s (%s PTX; does this GPU and driver support it?): %w", name, kernels.Arch, err)
		}
		b.mods = append(b.mods, m)
		for _, fn := range moduleFuncs[name] {
			f, err := m.Function(fn)
			if err != nil {
				return fmt.Errorf("kernel module %s: function %s: %w", name, fn, err)
			}
			funcs[fn] = f
		}
	}
	var missing []string
	get := func(name string) cu.Function {
		f, ok := funcs[name]
		if !ok {
			missing = append(missing, name)
		}
		return f
	}
	k := &b.k
	sg := [2]string{"s", "g"}
	for i, nr := range nrChoices {
		for j, v := range sg {
			k.matvecF16[i][j] = get(fmt.Sprintf("matvec_f16_r%d_%s", nr, v))
			k.matvecW4[i][j] = get(fmt.Sprintf("matvec_w4a16_r%d_%s", nr, v))
		}
	}
	for i, s := range [2]string{"int4", "f16"} {
		for j, v := range sg {
			k.gateup[i][j] = get(fmt.Sprintf("experts_gateup_%s_%s", s, v))
			k.down[i][j] = get(fmt.Sprintf("experts_down_%s_%s", s, v))
		}
	}
	k.rmsnorm, k.siluMul, k.add = get("rmsnorm"), get("silu_mul_f32"), get("add_f32")
	k.addScaled, k.addGated = get("add_scaled_f32"), get("add_gated_f32")
	k.rope, k.kvAppend, k.attention = get("rope_f32"), get("kv_append_f32"), get("attention_f32")
	k.topk, k.embed, k.argmax, k.spin = get("router_topk"), get("embed_gather"), get("argmax_masked"), get("spin_ns")
	if len(missing) > 0 {
		return fmt.Errorf("kernels %v: not in the embedded PTX", missing)
	}
	// Kernels that stage vectors in shared memory may use the device's
	// opt-in limit (227 KiB on H100/H200) instead of the default 48 KiB.
	big := []cu.Function{k.attention, k.topk}
	for i := range nrChoices {
		big = append(big, k.matvecF16[i][0], k.matvecW4[i][0])
	}
	for i := range 2 {
		big = append(big, k.gateup[i][0], k.down[i][0])
	}
	for _, f := range big {
		if err := setMaxDynamicShared(f, b.smemMax); err != nil {
			return err
		}
	}
	return nil
}

// moduleFuncs names the kernels of each module; a name missing from its PTX
// fails Open.
var moduleFuncs = map[string][]string{
	"matvec_f16": {"matvec_f16_r1_s", "matvec_f16_r2_s", "matvec_f16_r4_s",
		"matvec_f16_r1_g", "matvec_f16_r2_g", "matvec_f16_r4_g"},
	"matvec_w4a16": {"matvec_w4a16_r1_s", "matvec_w4a16_r2_s", "matvec_w4a16_r4_s",
		"matvec_w4a16_r1_g", "matvec_w4a16_r2_g", "matvec_w4a16_r4_g"},
	"experts_grouped": {"experts_gateup_int4_s", "experts_gateup_int4_g", "experts_gateup_f16_s",
		"experts_gateup_f16_g", "experts_down_int4_s", "experts_down_int4_g", "experts_down_f16_s",
		"experts_down_f16_g"},
	"norm":           {"rmsnorm"},
	"elementwise":    {"silu_mul_f32", "add_f32", "add_scaled_f32", "add_gated_f32"},
	"rope_attention": {"rope_f32", "kv_append_f32", "attention_f32"},
	"router":         {"router_topk"},
	"embed_argmax":   {"embed_gather", "argmax_masked"},
	"bench":          {"spin_ns"},
}

// Kernel arguments. gorgonia's Launch copies 8 bytes from each argument
// pointer, and the driver reads as many bytes as the parameter has (4 for
// int and float, 8 for pointers and double), little-endian, so every
// argument is passed as one uint64.
func argPtr(p cu.DevicePtr) uint64 { return uint64(p) }
func argInt(v int) uint64          { return uint64(int64(v)) }
func argF32(v float32) uint64      { return uint64(math.Float32bits(v)) }
func argF64(v float64) uint64      { return math.Float64bits(v) }

// launch issues fn on the compute stream; owner thread only.
func (b *Backend) launch(fn cu.Function, grid, block, smem int, args ...uint64) error {
	params := make([]unsafe.Pointer, len(args))
	for i := range args {
		params[i] = unsafe.Pointer(&args[i])
	}
	return fn.Launch(grid, 1, 1, block, 1, 1, smem, b.compute, params)
}

// launchAsync validates nothing: the caller did. It enqueues the launch on
// the owner and returns; a launch error surfaces at the next synchronising
// call.
func (b *Backend) launchAsync(op string, fn cu.Function, grid, block, smem int, args ...uint64) error {
	return b.o.async(func() error {
		if err := b.launch(fn, grid, block, smem, args...); err != nil {
			return fmt.Errorf("cuda: %s: launch: %w", op, err)
		}
		return nil
	})
}
