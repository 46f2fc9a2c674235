//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/horizon-runmap/horizon/kernels"
)

// kernelSet holds every kernel the backend launches, looked up by name once
// at Open.
type kernelSet struct {
	matvecF16 [3][2]cu.Function // [NR index][0 shared x, 1 global x]
	// sharedDown is a shared expert's SiLU·up, down matvec and gated
	// residual in one launch (matvec_f16.cu shared_down_f16_r*), by NR index.
	sharedDown [3]cu.Function
	matvecW4   [4][2]cu.Function    // [NR index][0 shared, 1 global]
	gateup     [2][2][2]cu.Function // [0 int4, 1 fp16][NRP index][0 shared, 1 global]
	down       [2][3][2]cu.Function // [0 int4, 1 fp16][downVariants index][0 shared, 1 global]
	// The same grouped kernels reading the row table from device memory
	// (suffix _t), for captured steps.
	gateupT [2][2][2]cu.Function
	downT   [2][3][2]cu.Function
	// experts_routed.cu: the staged _t kernels with the layer's routing
	// done in each block (tuning.routeIn): [0 int4, 1 fp16][NRP index],
	// [0 int4, 1 fp16][downVariants index].
	gateupR [2][2]cu.Function
	downR   [2][3]cu.Function
	// experts_tc.cu: the int4 _t kernels on the tensor cores
	// (tuning.tcDecode): [tcDecodeVariants index].
	gateupTC, downTC [3]cu.Function
	// matmul.cu: the batched row kernels of prefill (batched.go):
	// [0 int4, 1 FP16][matmulTB index].
	matmul [2][2]cu.Function
	// matmul_tc.cu: the same products on the tensor cores (tuning.matmulTC):
	// [0 int4, 1 FP16].
	matmulTC [2]cu.Function
	// matmul_tc.cu's grouped kernels: several experts' matrices a launch
	// (ExpertMatMulGroup), int4 and FP16 as matmulTC.
	matmulTCGrouped [2]cu.Function
	// matmul_tc.cu's split-K FP16 kernel and the reduction of its partials
	// (the default; tuning.tcNoSplitK).
	matmulTCSplitK, splitKReduce cu.Function
	// splitKReduceParts is splitKReduce into a fused matrix's row blocks
	// (MatMulParts).
	splitKReduceParts cu.Function
	// matmul_tc.cu's pre-split twins (the default; tuning.tcNoPreSplit): tc_split_rows,
	// then the matmuls reading its arrays ([0 int4, 1 FP16]).
	tcSplitRows                     cu.Function
	matmulTCPre, matmulTCGroupedPre [2]cu.Function
	// matmul_tc.cu's grouped int4 kernels with a cp.async ring of the
	// matrix's chunks (the default, tcGroupedRing; [0 in-kernel split, 1 pre-split]),
	// and the FP16 dense twins (split-K; pre-split; tcDenseRing).
	matmulTCGroupedRing [2]cu.Function
	// and with two chunks a stage (_ring2, tuning.tcRing2).
	matmulTCGroupedRing2 [2]cu.Function
	// The narrow twins of both (tuning.tcNarrow; [0 ring, 1 ring2][0
	// in-kernel split, 1 pre-split]).
	matmulTCGroupedNarrow [2][2]cu.Function
	// The fragment-direct grouped int4 kernel (pre-split only;
	// tcGroupedFD): codes loaded straight into B fragments, activations
	// staged in slices.
	matmulTCGroupedFD cu.Function
	// and its small-entry build (at most 16 pairs an entry; tcGroupedFD16).
	matmulTCGroupedFD16 cu.Function
	// The gate|up builds of both (RoutedGateUp: gate, up and SiLUMul in
	// one launch): [0] fragment-direct, [1] small-entry, [2] small-entry
	// with three activation stages (tuning.tcFD16S3).
	matmulTCGroupedGU [3]cu.Function
	// The small-entry build with three activation stages (fd16Kernel).
	matmulTCGroupedFD16S3 cu.Function
	// The prefill attention on the tensor cores over an FP16 cache
	// (attnTC; tuning.noAttTC turns it off).
	attentionTC cu.Function
	// The FP16-activation builds (tuning.tcA16): [0] fragment-direct,
	// [1] small-entry; and their gate|up builds.
	matmulTCGroupedA16, matmulTCGroupedGUA16 [2]cu.Function
	// The row-shift FP16 builds (tuning.tcA16Row), the same four on
	// tc_split_rows_a16r's pre-split (tcSplitRowsA16R).
	matmulTCGroupedA16R, matmulTCGroupedGUA16R [2]cu.Function
	tcSplitRowsA16R                            cu.Function
	// The chunk-shift FP16 pre-split (and rounding) of the FP16-activation
	// projections (MatMulA16).
	tcSplitRowsA16C cu.Function
	// The two-stage split-K kernel's FP16-activation build (MatMulA16 where
	// a block's share is under the burst twin's bound).
	matmulTCSplitKA16 cu.Function
	// and its FP16 split-K twin (matmul_tc_f16_pre_splitk_fd; tcDenseFD).
	matmulTCSplitKFD                       cu.Function
	matmulTCSplitKBurst                    cu.Function // the split-K FP16 matmul with a block's chunks in flight together (the default; tcDenseBurst)
	matmulTCSplitKBurstA16                 cu.Function // its FP16-activation build (tuning.tcA16Dense)
	matmulTCSplitKRing, matmulTCPreRingF16 cu.Function
	// prefill_rows.cu: the batched prefill's per-token ops over its rows
	// (rowops.go).
	ropeRows, topkRows, combineRows, addGatedRows cu.Function
	topkRowsWarp                                  cu.Function // router_topk_rows' values with a warp a row (topKRowsLaunch)
	// matmul_tc.cu's tc_route_groups: a batched prefill's routing
	// grouped into the grouped tensor-core kernels' tables on the device
	// (backend.DeviceRouting, routed.go).
	routeGroups cu.Function
	// The kernels that store or read the KV cache, per cache element type:
	// kv[0] over an FP32 cache, kv[1] over an FP16 one (the _kv16 kernels).
	kv [2]kvKernels
	// experts_fused.cu: gate/up and down of an int4 routed group in one
	// launch with a grid barrier between them (fusedExperts).
	moeInt4T cu.Function
	// decode.cu: the kernels only captured steps use.
	stepSet, embedStep, qkNormStep           cu.Function
	routeStep, argmaxStep, addGatedResidStep cu.Function
	awaitStep                                cu.Function
	routerRouteStep                          cu.Function // the router matvec and route_step in one launch (tuning.routeFused)
	prefetchL2                               cu.Function // the captured steps' L2 prefetch branch (step_prefetch.go)
	// persistent.cu: the persistent decode kernel's builds (persistentBuilds).
	persistent [len(persistentBuilds)]cu.Function
	rmsnorm    cu.Function
	siluMul    cu.Function
	add        cu.Function
	addScaled  cu.Function
	addGated   cu.Function
	rope       cu.Function
	attention  cu.Function
	topk       cu.Function
	embed      cu.Function
	embedRows  cu.Function
	argmax     cu.Function
	// chain.cu: issue 14's persistent-step probe (chain_test.go); usable
	// only where chainOK (its shared memory fits the device).
	chain   [len(chainBuilds)]cu.Function
	chainOK bool
	// bench.cu: benchmark helpers, and probeStore for the mapped-memory
	// self-check at Open.
	spin       cu.Function
	streamRead cu.Function
	empty      cu.Function
	probeStore cu.Function
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
		if name == "matvec_f16" {
			// matvec_body's pre-wait L2 prefetch budget (tuning.waitPrefetch).
			// Not found, it stays 0 (the kernels read 0: no prefetch) and only
			// a tuning that asks for the prefetch fails (setTuning).
			if p, _, err := m.Global("hz_wait_prefetch"); err == nil {
				b.waitPF = p
			} else {
				b.waitPFErr = fmt.Errorf("kernel module %s: hz_wait_prefetch: %w", name, err)
			}
		}
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
	for j, v := range sg {
		for i, nr := range f16NR {
			k.matvecF16[i][j] = get(fmt.Sprintf("matvec_f16_r%d_%s", nr, v))
		}
		for i, nr := range w4NR {
			k.matvecW4[i][j] = get(fmt.Sprintf("matvec_w4a16_r%d_%s", nr, v))
		}
		for si, s := range [2]string{"int4", "f16"} {
			for i, nrp := range gateUpNRP {
				k.gateup[si][i][j] = get(fmt.Sprintf("experts_gateup_%s_p%d_%s", s, nrp, v))
				k.gateupT[si][i][j] = get(fmt.Sprintf("experts_gateup_%s_p%d_%s_t", s, nrp, v))
			}
			for i, dv := range downVariants {
				k.down[si][i][j] = get(fmt.Sprintf("experts_down_%s_%s_%s", s, dv.suffix, v))
				k.downT[si][i][j] = get(fmt.Sprintf("experts_down_%s_%s_%s_t", s, dv.suffix, v))
			}
		}
	}
	for si, s := range [2]string{"int4", "f16"} {
		for i, nrp := range gateUpNRP {
			k.gateupR[si][i] = get(fmt.Sprintf("experts_gateup_%s_p%d_s_r", s, nrp))
		}
		for i, dv := range downVariants {
			k.downR[si][i] = get(fmt.Sprintf("experts_down_%s_%s_s_r", s, dv.suffix))
		}
	}
	for i, tb := range matmulTB {
		k.matmul[0][i] = get(fmt.Sprintf("matmul_w4a16_b%d", tb))
		k.matmul[1][i] = get(fmt.Sprintf("matmul_f16_b%d", tb))
	}
	k.matmulTC = [2]cu.Function{get("matmul_tc_w4a16"), get("matmul_tc_f16")}
	k.matmulTCGrouped = [2]cu.Function{get("matmul_tc_grouped_w4a16"), get("matmul_tc_grouped_f16")}
	k.matmulTCSplitK, k.splitKReduce = get("matmul_tc_f16_splitk"), get("matmul_splitk_reduce")
	k.splitKReduceParts = get("matmul_splitk_reduce_parts")
	k.tcSplitRows = get("tc_split_rows")
	k.matmulTCPre = [2]cu.Function{get("matmul_tc_pre_w4a16"), get("matmul_tc_pre_f16")}
	k.matmulTCGroupedPre = [2]cu.Function{get("matmul_tc_grouped_pre_w4a16"), get("matmul_tc_grouped_pre_f16")}
	k.matmulTCGroupedRing = [2]cu.Function{get("matmul_tc_grouped_ring_w4a16"), get("matmul_tc_grouped_pre_ring_w4a16")}
	k.matmulTCGroupedRing2 = [2]cu.Function{get("matmul_tc_grouped_ring2_w4a16"), get("matmul_tc_grouped_pre_ring2_w4a16")}
	k.matmulTCGroupedNarrow = [2][2]cu.Function{
		{get("matmul_tc_grouped_ring_narrow_w4a16"), get("matmul_tc_grouped_pre_ring_narrow_w4a16")},
		{get("matmul_tc_grouped_ring2_narrow_w4a16"), get("matmul_tc_grouped_pre_ring2_narrow_w4a16")}}
	k.matmulTCGroupedFD, k.matmulTCSplitKFD = get("matmul_tc_grouped_pre_fd_w4a16"), get("matmul_tc_f16_pre_splitk_fd")
	k.matmulTCGroupedFD16 = get("matmul_tc_grouped_pre_fd16_w4a16")
	k.matmulTCGroupedGU = [3]cu.Function{get("matmul_tc_grouped_pre_fd_gu_w4a16"), get("matmul_tc_grouped_pre_fd16_gu_w4a16"),
		get("matmul_tc_grouped_pre_fd16_gu_s3_w4a16")}
	k.matmulTCGroupedFD16S3 = get("matmul_tc_grouped_pre_fd16_s3_w4a16")
	k.matmulTCGroupedA16 = [2]cu.Function{get("matmul_tc_grouped_pre_fd_a16_w4a16"), get("matmul_tc_grouped_pre_fd16_a16_w4a16")}
	k.matmulTCGroupedGUA16 = [2]cu.Function{get("matmul_tc_grouped_pre_fd_gu_a16_w4a16"), get("matmul_tc_grouped_pre_fd16_gu_a16_w4a16")}
	k.matmulTCGroupedA16R = [2]cu.Function{get("matmul_tc_grouped_pre_fd_a16r_w4a16"), get("matmul_tc_grouped_pre_fd16_a16r_w4a16")}
	k.matmulTCGroupedGUA16R = [2]cu.Function{get("matmul_tc_grouped_pre_fd_gu_a16r_w4a16"), get("matmul_tc_grouped_pre_fd16_gu_a16r_w4a16")}
	k.tcSplitRowsA16R = get("tc_split_rows_a16r")
	k.tcSplitRowsA16C = get("tc_split_rows_a16c")
	k.matmulTCSplitKA16 = get("matmul_tc_f16_splitk_a16")
	k.matmulTCSplitKBurst = get("matmul_tc_f16_pre_splitk_burst")
	k.matmulTCSplitKBurstA16 = get("matmul_tc_f16_pre_splitk_burst_a16")
	k.matmulTCSplitKRing, k.matmulTCPreRingF16 = get("matmul_tc_f16_splitk_ring"), get("matmul_tc_pre_ring_f16")
	k.ropeRows, k.topkRows, k.combineRows = get("rope_rows_f32"), get("router_topk_rows"), get("combine_rows_f32")
	k.attentionTC = get("attention_tc_rows_kv16")
	k.topkRowsWarp = get("router_topk_rows_warp")
	k.routeGroups = get("tc_route_groups")
	k.addGatedRows = get("add_gated_rows_f32")
	for i, names := range kvKernelNames {
		k.kv[i] = kvKernels{append: get(names[0]), attention: get(names[1]), attentionRows: get(names[2]), ropeKVStep: get(names[3]),
			qkNormRopeKVStep: get(names[4]), attentionStep: get(names[5]), attentionInStep: get(names[6]), attentionTiled: get(names[7]),
			matvecRopeKV: get(names[8]), attentionPfStep: get(names[9]), attentionPipeStep: get(names[10]), attentionTiled32: get(names[11]),
			attentionRingStep: get(names[12]), attentionTraceStep: get(names[13]), attentionB3Step: get(names[14]),
			attentionCsStep: get(names[15]), ropeKVRows: get(names[16]), qkNormRopeKVRows: get(names[17])}
	}
	k.rmsnorm, k.siluMul, k.add = get("rmsnorm"), get("silu_mul_f32"), get("add_f32")
	k.addScaled, k.addGated = get("add_scaled_f32"), get("add_gated_f32")
	k.rope = get("rope_f32")
	k.topk, k.embed, k.argmax = get("router_topk"), get("embed_gather"), get("argmax_masked")
	k.embedRows = get("embed_rows")
	k.spin, k.streamRead, k.empty, k.probeStore = get("spin_ns"), get("stream_read"), get("empty_kernel"), get("probe_store")
	for i, cb := range chainBuilds {
		k.chain[i] = get(cb.name)
	}
	k.stepSet, k.embedStep, k.qkNormStep = get("step_set"), get("embed_step"), get("qk_norm_step")
	k.routeStep = get("route_step")
	k.argmaxStep, k.addGatedResidStep = get("argmax_step"), get("add_gated_resid_step")
	k.awaitStep = get("await_step")
	k.routerRouteStep = get("router_route_step")
	for i, nr := range f16NR {
		k.sharedDown[i] = get(fmt.Sprintf("shared_down_f16_r%d", nr))
	}
	k.prefetchL2 = get("prefetch_l2")
	k.moeInt4T = get("experts_moe_int4_t")
	for i, v := range tcDecodeVariants {
		k.gateupTC[i] = get("experts_gateup_int4_" + v + "_t")
		k.downTC[i] = get("experts_down_int4_" + v + "_t")
	}
	for i, n := range persistentBuilds {
		k.persistent[i] = get(n)
	}
	if len(missing) > 0 {
		return fmt.Errorf("kernels %v: not in the embedded PTX", missing)
	}
	b.fnName = make(map[cu.Function]string, len(funcs))
	for n, f := range funcs {
		b.fnName[f] = n
	}
	b.pdlFns = map[cu.Function]bool{}
	for _, m := range pdlModules {
		for _, n := range moduleFuncs[m] {
			b.pdlFns[funcs[n]] = true
		}
	}
	// Kernels that stage vectors in shared memory may use the device's
	// opt-in limit (227 KiB on H100/H200) instead of the default 48 KiB.
	big := []cu.Function{k.topk, k.topkRows, k.moeInt4T, k.matmul[0][0], k.matmul[0][1], k.matmul[1][0], k.matmul[1][1],
		k.gateupTC[0], k.gateupTC[1], k.gateupTC[2], k.downTC[0], k.downTC[1], k.downTC[2]}
	for i := range f16NR {
		big = append(big, k.matvecF16[i][0], k.sharedDown[i])
	}
	for i := range k.kv {
		big = append(big, k.kv[i].matvecRopeKV)
	}
	for i := range w4NR {
		big = append(big, k.matvecW4[i][0])
	}
	for si := range 2 {
		for i := range gateUpNRP {
			big = append(big, k.gateup[si][i][0], k.gateupT[si][i][0])
		}
		for i := range downVariants {
			// the down kernels' _g variants still keep p[A][R] in shared memory
			big = append(big, k.down[si][i][0], k.down[si][i][1], k.downT[si][i][0], k.downT[si][i][1])
		}
	}
	for _, f := range big {
		if err := setMaxDynamicShared(f, b.smemMax); err != nil {
			return err
		}
	}
	// The ring kernels' shared memory is over the 48 KiB a launch gets
	// without opting in.
	for _, f := range k.matmulTCGroupedRing {
		if err := setMaxDynamicShared(f, tcSmemRing); err != nil {
			return fmt.Errorf("matmul_tc ring kernel: %w", err)
		}
	}
	for _, f := range append(k.matmulTCGroupedRing2[:], k.matmulTCGroupedNarrow[1][:]...) {
		if err := setMaxDynamicShared(f, tcSmemRing2); err != nil {
			return fmt.Errorf("matmul_tc two-chunk ring kernel: %w", err)
		}
	}
	for _, f := range k.matmulTCGroupedNarrow[0] {
		if err := setMaxDynamicShared(f, tcSmemRing); err != nil {
			return fmt.Errorf("matmul_tc narrow ring kernel: %w", err)
		}
	}
	for _, f := range []cu.Function{k.matmulTCSplitKBurst, k.matmulTCSplitKBurstA16} {
		if err := setMaxDynamicShared(f, tcSmemBurst); err != nil {
			return fmt.Errorf("matmul_tc burst split-K kernel: %w", err)
		}
	}
	for _, f := range []cu.Function{k.matmulTCGroupedFD, k.matmulTCSplitKFD, k.matmulTCGroupedGU[0], k.matmulTCGroupedA16[0], k.matmulTCGroupedGUA16[0],
		k.matmulTCGroupedA16R[0], k.matmulTCGroupedGUA16R[0]} {
		if err := setMaxDynamicShared(f, tcSmemFD); err != nil {
			return fmt.Errorf("matmul_tc fragment-direct kernel: %w", err)
		}
	}
	for _, f := range []cu.Function{k.matmulTCGroupedFD16, k.matmulTCGroupedGU[1], k.matmulTCGroupedA16[1], k.matmulTCGroupedGUA16[1],
		k.matmulTCGroupedA16R[1], k.matmulTCGroupedGUA16R[1]} {
		if err := setMaxDynamicShared(f, tcSmemFD16); err != nil {
			return fmt.Errorf("matmul_tc fragment-direct small-entry kernel: %w", err)
		}
	}
	for _, f := range []cu.Function{k.matmulTCGroupedFD16S3, k.matmulTCGroupedGU[2]} {
		if err := setMaxDynamicShared(f, tcSmemFD16S3); err != nil {
			return fmt.Errorf("matmul_tc fragment-direct three-stage kernel: %w", err)
		}
	}
	if err := setMaxDynamicShared(k.attentionTC, attTCSmem); err != nil {
		return fmt.Errorf("prefill attention on the tensor cores: %w", err)
	}
	for i := range k.kv {
		if err := setMaxDynamicShared(k.kv[i].attentionTiled32, attTiledSmem(32)); err != nil {
			return fmt.Errorf("prefill attention, 32 queries a block: %w", err)
		}
		if err := setMaxDynamicShared(k.kv[i].attentionRingStep, attRingSmem); err != nil {
			return fmt.Errorf("decode attention ring: %w", err)
		}
	}
	// The chain probe takes one block an SM with most of its shared memory.
	k.chainOK = true
	for i, cb := range chainBuilds {
		if cb.smem == 0 {
			continue
		}
		if b.smemMax+smemStaticRoom < cb.smem {
			k.chainOK = false
			continue
		}
		if err := setMaxDynamicShared(k.chain[i], cb.smem); err != nil {
			return fmt.Errorf("chain probe %s: %w", cb.name, err)
		}
	}
	for _, f := range []cu.Function{k.matmulTCSplitKRing, k.matmulTCPreRingF16} {
		if err := setMaxDynamicShared(f, tcSmemRingF16); err != nil {
			return fmt.Errorf("matmul_tc FP16 ring kernel: %w", err)
		}
	}
	// The route-in kernels declare the block's GroupTable and route_step's
	// arrays as static shared memory, more than smemStaticRoom: their
	// dynamic limit (routeInSmem) is what the opt-in limit leaves the
	// largest of them.
	var routeIn []cu.Function
	for si := range 2 {
		routeIn = append(append(routeIn, k.gateupR[si][:]...), k.downR[si][:]...)
	}
	most := 0
	for _, f := range routeIn {
		st, err := staticShared(f)
		if err != nil {
			return err
		}
		most = max(most, st)
	}
	b.routeInSmem = b.smemMax + smemStaticRoom - most
	for _, f := range routeIn {
		if err := setMaxDynamicShared(f, b.routeInSmem); err != nil {
			return fmt.Errorf("route-in expert kernel: %w", err)
		}
	}
	// The persistent kernel's builds declare more static shared memory
	// than the 1 KiB smemMax leaves (every body's): their dynamic limit is
	// what the opt-in limit leaves them.
	for i, f := range k.persistent {
		st, err := staticShared(f)
		if err != nil {
			return err
		}
		b.persistentSmem[i] = b.smemMax + smemStaticRoom - st
		if err := setMaxDynamicShared(f, b.persistentSmem[i]); err != nil {
			return fmt.Errorf("%s: %w", persistentBuilds[i], err)
		}
	}
	return nil
}

// pdlModules are the modules whose every kernel calls grid_dep_enter
// (kernels/common.cuh) before any access that depends on the kernel ahead
// of it, so a captured step may launch them as programmatic dependent
// launches (attention_pf_step reads the step state and prefetches before
// it: the state was written by an earlier graph launch or by step_set, and
// a prefetch is a hint that no thread reads). Not bench (benchmark helpers, never captured) nor persistent
// (one launch per step).
var pdlModules = kernels.PDLModules

// Kernel arguments. Every argument is passed as one uint64 (launchKernel
// hands the driver a pointer to each), and the driver reads as many bytes as
// the parameter has (4 for int and float, 8 for pointers and double),
// little-endian.
func argPtr(p cu.DevicePtr) uint64 { return uint64(p) }
func argInt(v int) uint64          { return uint64(int64(v)) }
func argF32(v float32) uint64      { return uint64(math.Float32bits(v)) }
func argBool(v bool) uint64 {
	if v {
		return 1
	}
	return 0
}
func argF64(v float64) uint64 { return math.Float64bits(v) }

// launch issues fn on the compute stream; owner thread only. While the
// backend records (recordLaunches, persistent.go) it notes the launch
// instead.
func (b *Backend) launch(fn cu.Function, grid, block, smem int, args ...uint64) error {
	if b.rec != nil {
		return b.record(fn, grid, block, smem, args)
	}
	if b.pdl {
		prev := b.pdlPrev
		b.pdlPrev = true
		if prev && b.pdlFns[fn] {
			if b.capturing {
				b.pdlLaunches++
			} else {
				b.pdlOpLaunches++
			}
			return launchKernelPDL(fn, grid, block, smem, b.compute, args)
		}
	}
	return launchKernel(fn, grid, block, smem, b.compute, args, nil)
}

// launchGraph launches g on the compute stream; owner thread. The next
// kernel launched by launch is a plain launch: programmatic dependent
// launch relaxes a kernel's dependency on the kernel before it, not on a
// graph.
func (b *Backend) launchGraph(g *graph) error {
	b.pdlPrev = false
	return g.launch(b.compute)
}

// launchBlob is launch with a last by-value struct parameter read from blob
// (which must hold at least the parameter's size).
func (b *Backend) launchBlob(fn cu.Function, grid, block, smem int, blob unsafe.Pointer, args ...uint64) error {
	if b.rec != nil {
		return fmt.Errorf("recording a launch: a by-value row table cannot be recorded")
	}
	b.pdlPrev = b.pdl
	return launchKernel(fn, grid, block, smem, b.compute, args, blob)
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

// occKey identifies a (kernel, dynamic shared memory) pair for the
// occupancy cache.
type occKey struct {
	fn   cu.Function
	smem int
}

// residentBlocks is how many blocks of fn (256 threads, smem bytes) the
// whole GPU holds at once: the most a grid-striding kernel should launch.
// Owner thread only (it caches in b.occ).
func (b *Backend) residentBlocks(fn cu.Function, smem int) int {
	key := occKey{fn, smem}
	if n, ok := b.occ[key]; ok {
		return n
	}
	per, err := blocksPerSM(fn, block, smem)
	if err != nil || per < 1 {
		per = 1 // the launch itself will report a real problem
	}
	n := per * b.sms
	b.occ[key] = n
	return n
}
