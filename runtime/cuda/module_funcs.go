package cuda

import "fmt"

// Rows-per-warp variants compiled for each matvec (index i of the arrays in
// kernelSet holds NR = the i-th choice): FP16 1, 2, 4 (8 chunks per lane
// per step between them), int4 1, 2, 4, 8.
var (
	f16NR = [3]int{1, 2, 4}
	w4NR  = [4]int{1, 2, 4, 8}
)

// Grouped-kernel variants: gate/up tasks of NRP gate + NRP up rows
// (gateUpNRP); down tasks of NR rows of one expert, CPL 16-byte chunks per
// lane per step (downVariants; kernel suffix _r4, _r8, _r4c1).
var gateUpNRP = [2]int{2, 4}

type downVariant struct {
	nr, cpl int
	suffix  string
}

var downVariants = [3]downVariant{{4, 2, "r4"}, {8, 1, "r8"}, {4, 1, "r4c1"}}

// persistentBuilds are the interpreter's builds (kernels/persistent.cu),
// one per expert format: INT4 experts and FP16 experts.
var persistentBuilds = [2]string{"decode_persistent", "decode_persistent_f16x"}

// moduleFuncs names the kernels of each module; a name missing from its PTX
// fails Open, and a PTX entry missing from
// here fails TestModuleFuncsCoverPTX (no GPU needed).
var moduleFuncs = map[string][]string{
	"matvec_f16": {"matvec_f16_r1_s", "matvec_f16_r2_s", "matvec_f16_r4_s",
		"matvec_f16_r1_g", "matvec_f16_r2_g", "matvec_f16_r4_g", "shared_down_f16_r1", "shared_down_f16_r2", "shared_down_f16_r4"},
	"matvec_rope": {"matvec_f16_rope_kv", "matvec_f16_rope_kv_kv16"},
	"matvec_w4a16": {"matvec_w4a16_r1_s", "matvec_w4a16_r2_s", "matvec_w4a16_r4_s", "matvec_w4a16_r8_s",
		"matvec_w4a16_r1_g", "matvec_w4a16_r2_g", "matvec_w4a16_r4_g", "matvec_w4a16_r8_g"},
	"experts_grouped": groupedNames(),
	"experts_fused":   {"experts_moe_int4_t"},
	"experts_tc":      {"experts_gateup_int4_tc4_t", "experts_gateup_int4_tc8_t", "experts_gateup_int4_tca4_t", "experts_down_int4_tc4_t", "experts_down_int4_tc8_t", "experts_down_int4_tca4_t"},
	"matmul":          {"matmul_f16_b8", "matmul_f16_b4", "matmul_w4a16_b8", "matmul_w4a16_b4"},
	"matmul_tc": {"matmul_tc_f16", "matmul_tc_w4a16", "matmul_tc_grouped_f16", "matmul_tc_grouped_w4a16", "matmul_tc_f16_splitk", "matmul_splitk_reduce",
		"tc_split_rows", "matmul_tc_pre_f16", "matmul_tc_pre_w4a16", "matmul_tc_grouped_pre_f16", "matmul_tc_grouped_pre_w4a16",
		"matmul_tc_grouped_ring_w4a16", "matmul_tc_grouped_pre_ring_w4a16", "matmul_tc_f16_splitk_ring", "matmul_tc_pre_ring_f16",
		"matmul_tc_grouped_ring2_w4a16", "matmul_tc_grouped_pre_ring2_w4a16", "matmul_tc_grouped_ring_narrow_w4a16",
		"matmul_tc_grouped_pre_ring_narrow_w4a16", "matmul_tc_grouped_ring2_narrow_w4a16", "matmul_tc_grouped_pre_ring2_narrow_w4a16",
		"matmul_tc_grouped_pre_fd_w4a16", "matmul_tc_grouped_pre_fd16_w4a16", "matmul_tc_f16_pre_splitk_fd", "tc_route_groups",
		"matmul_tc_f16_pre_splitk_burst", "matmul_tc_grouped_pre_fd_gu_w4a16", "matmul_tc_grouped_pre_fd16_gu_w4a16",
		"matmul_tc_grouped_pre_fd16_s3_w4a16", "matmul_tc_grouped_pre_fd16_gu_s3_w4a16",
		"matmul_tc_grouped_pre_fd_a16_w4a16", "matmul_tc_grouped_pre_fd16_a16_w4a16", "matmul_tc_grouped_pre_fd_gu_a16_w4a16",
		"matmul_tc_grouped_pre_fd16_gu_a16_w4a16", "matmul_tc_f16_pre_splitk_burst_a16",
		"matmul_tc_grouped_pre_fd_a16r_w4a16", "matmul_tc_grouped_pre_fd16_a16r_w4a16", "matmul_tc_grouped_pre_fd_gu_a16r_w4a16",
		"matmul_tc_grouped_pre_fd16_gu_a16r_w4a16", "tc_split_rows_a16r", "tc_split_rows_a16c", "matmul_tc_f16_splitk_a16",
		"matmul_splitk_reduce_parts"},
	"prefill_rows": {"rope_rows_f32", "attention_rows_f32", "attention_rows_f32_kv16", "router_topk_rows", "router_topk_rows_warp", "combine_rows_f32", "add_gated_rows_f32",
		"rope_kv_rows", "qk_norm_rope_kv_rows", "rope_kv_rows_kv16", "qk_norm_rope_kv_rows_kv16"},
	"prefill_attention": {"attention_tiled_rows_f32", "attention_tiled_rows_f32_kv16", "attention_tiled32_rows_f32", "attention_tiled32_rows_f32_kv16",
		"attention_tc_rows_kv16"},
	"experts_routed": routedNames(),
	"norm":           {"rmsnorm"},
	"elementwise":    {"silu_mul_f32", "add_f32", "add_scaled_f32", "add_gated_f32"},
	"rope_attention": {"rope_f32", "kv_append_f32", "attention_f32", "kv_append_f16", "attention_f32_kv16"},
	"router":         {"router_topk"},
	"embed_argmax":   {"embed_gather", "argmax_masked", "embed_rows"},
	"bench":          {"spin_ns", "stream_read", "empty_kernel", "probe_store"},
	"chain":          {"chain_matvec_f16", "chain_matvec_f16_s6", "chain_matvec_f16_t512", "chain_matvec_f16_p64", "chain_matvec_f16_regs", "chain_matvec_f16_regs16"},
	"prefetch":       {"prefetch_l2"},
	"decode": {"step_set", "embed_step", "qk_norm_step", "rope_kv_step", "attention_step", "attention_in_step", "route_step",
		"argmax_step", "add_gated_resid_step", "qk_norm_rope_kv_step", "await_step", "router_route_step",
		"rope_kv_step_kv16", "qk_norm_rope_kv_step_kv16", "attention_step_kv16", "attention_in_step_kv16",
		"attention_pf_step", "attention_pf_step_kv16", "attention_pipe_step", "attention_pipe_step_kv16",
		"attention_ring_step", "attention_ring_step_kv16", "attention_trace_step", "attention_trace_step_kv16",
		"attention_b3_step", "attention_b3_step_kv16", "attention_cs_step", "attention_cs_step_kv16"},
	"persistent": persistentBuilds[:],
}

// groupedNames lists experts_grouped.cu's kernels: every (scheme, variant,
// shared|global) with a by-value row table, and the same with suffix _t
// (table in device memory).
func groupedNames() []string {
	var out []string
	for _, s := range []string{"int4", "f16"} {
		for _, v := range []string{"s", "g"} {
			for _, nrp := range gateUpNRP {
				n := fmt.Sprintf("experts_gateup_%s_p%d_%s", s, nrp, v)
				out = append(out, n, n+"_t")
			}
			for _, dv := range downVariants {
				n := fmt.Sprintf("experts_down_%s_%s_%s", s, dv.suffix, v)
				out = append(out, n, n+"_t")
			}
		}
	}
	return out
}

// routedNames lists experts_routed.cu's kernels: the staged gate/up and
// down of each scheme and variant with suffix _s_r.
func routedNames() []string {
	var out []string
	for _, s := range []string{"int4", "f16"} {
		for _, nrp := range gateUpNRP {
			out = append(out, fmt.Sprintf("experts_gateup_%s_p%d_s_r", s, nrp))
		}
		for _, dv := range downVariants {
			out = append(out, fmt.Sprintf("experts_down_%s_%s_s_r", s, dv.suffix))
		}
	}
	return out
}
