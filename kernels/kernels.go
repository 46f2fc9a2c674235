// Package kernels holds Horizon's CUDA kernels: the .cu sources, the PTX
// nvcc generated from them for compute_90 (`make kernels`), and this Go
// package, which embeds the PTX so that runtime/cuda can load it with
// cuModuleLoadData. It has no cgo and is always built.
//
// One .cu per op family, each compiled to one PTX module of the same name:
//
//	matvec_f16       FP16 weights × FP32 x (non-routed projections, lm_head)
//	matvec_rope      the q|k|v matvec with RoPE and the KV append in its
//	                 epilogue (layers without q/k norms; tuning.ropeInQKV)
//	matvec_w4a16     qpack-int4-b256-v1 expert matrix × FP32 x
//	experts_grouped  gate/up+SiLU and down+combine of a routed group, one
//	                 launch each, through a device-side row table
//	experts_fused    the same two in one launch (int4, captured steps):
//	                 the down rows prefetched into L2 during gate/up, a grid
//	                 barrier between the phases
//	experts_tc       the grouped int4 gate/up and down of one decode token on
//	                 the tensor cores (an mma per 16 rows, a diagonal B
//	                 operand keeping each lane's chunk sums apart; not the
//	                 row kernels' bits; runtime/cuda tuning.tcDecode, off)
//	matmul           the batched row kernels of prefill: FP16 or int4 rows ×
//	                 a group of 8 (or 4) tokens staged once, each (row,
//	                 token) the per-token row kernel's bits
//	matmul_tc        the same products on the tensor cores (mma.sync, FP16
//	                 inputs: activations split into two FP16 parts per
//	                 32-value chunk, FP32 accumulation; not the row kernels'
//	                 bits; the default, runtime/cuda tuning.noMatmulTC
//	                 turns it off; the grouped int4 twins with a cp.async
//	                 ring of codes, the default: tuning.tcNoRing; two
//	                 chunks a stage: tuning.tcRing2; the FP16 ring twins:
//	                 tuning.tcRingF16; the fragment-direct grouped int4
//	                 kernel, codes straight into B fragments:
//	                 tcGroupedFD, the default for small launches)
//	prefill_rows     a batched prefill's RoPE, attention and top-k over
//	                 the batch's rows, one launch each
//	prefill_attention the batch's causal attention tiled: a block reads
//	                 each K and V row once for 16 queries of a head (32
//	                 under tuning.attTiled32), a warp's queries together
//	norm             RMSNorm
//	elementwise      SiLU·up, add, scaled add, gated add
//	rope_attention   RoPE, KV append, single-query attention
//	router           softmax + top-k
//	embed_argmax     embedding gather, argmax with EOS masking
//	decode           the captured decode step's kernels (state and routed
//	                 groups in device memory; bodies in decode.cuh)
//	persistent       the persistent decode kernel: one launch interprets a
//	                 step's program of the kernels above, with counters in
//	                 device memory between its instructions
//	prefetch         L2 prefetch of weight bytes (the captured steps' optional
//	                 prefetch branch, runtime/cuda/step_prefetch.go)
//	chain            issue 14's probe of a persistent step (benchmarks only):
//	                 a program of dependent FP16 matvecs in one launch, one
//	                 block an SM, counters between ops, weight tiles
//	                 streaming through a shared-memory ring across the waits
//	bench            benchmark helpers (timer spin, streaming-read ceiling,
//	                 empty kernel) and the mapped-memory probe
//
// common.cuh holds the device functions several modules share, above all the
// one per-row reduction of each weight format and the warp loop every row
// kernel runs (row_pipeline), which is what makes the scalar, grouped and
// fused expert executors bit-identical; tc.cuh the tensor-core pieces that
// matmul_tc and experts_tc share. emu/ runs the row kernels on the CPU
// (a fiber per CUDA thread) to check them without a GPU; NOTES.md has the
// performance notes.
//
// Each PTX file starts with a line recording the SHA-256 of its .cu and of
// the headers it includes; TestPTXIsFresh fails when a source changed and
// its PTX was not regenerated.
package kernels

import (
	"embed"
	"fmt"
	"sort"
	"strings"
)

//go:embed *.ptx
var ptxFS embed.FS

// Arch is the virtual architecture the PTX targets; the driver JIT-compiles
// it for the GPU it runs on (sm_90 and later: the kernels of captured steps
// use griddepcontrol, programmatic dependent launch, common.cuh).
const Arch = "compute_90"

// sourcesPrefix starts the first line of every PTX file.
const sourcesPrefix = "// horizon-kernel-sources: "

// Modules lists the embedded PTX modules by name (file name without .ptx),
// sorted.
func Modules() []string {
	ents, err := ptxFS.ReadDir(".")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".ptx"); ok {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// PTX returns the PTX text of module name, NUL-terminated as
// cuModuleLoadData wants it.
func PTX(name string) (string, error) {
	b, err := ptxFS.ReadFile(name + ".ptx")
	if err != nil {
		return "", fmt.Errorf("kernels: no module %q: %w", name, err)
	}
	return string(b) + "\x00", nil
}

// Source is one file a PTX module was generated from.
type Source struct {
	File   string // e.g. "matvec_f16.cu", "common.cuh"
	SHA256 string // lower-case hex
}

// Sources returns the files (and their SHA-256) recorded in the first line
// of module name's PTX.
func Sources(name string) ([]Source, error) {
	b, err := ptxFS.ReadFile(name + ".ptx")
	if err != nil {
		return nil, fmt.Errorf("kernels: no module %q: %w", name, err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	rest, ok := strings.CutPrefix(first, sourcesPrefix)
	if !ok {
		return nil, fmt.Errorf("kernels: %s.ptx does not start with %q: regenerate it with `make kernels`", name, strings.TrimSpace(sourcesPrefix))
	}
	f := strings.Fields(rest)
	if len(f)%2 != 0 || len(f) == 0 {
		return nil, fmt.Errorf("kernels: %s.ptx: malformed sources line %q", name, first)
	}
	var out []Source
	for i := 0; i < len(f); i += 2 {
		sum, ok := strings.CutPrefix(f[i+1], "sha256=")
		if !ok || len(sum) != 64 {
			return nil, fmt.Errorf("kernels: %s.ptx: malformed sources line %q", name, first)
		}
		out = append(out, Source{File: f[i], SHA256: sum})
	}
	return out, nil
}

// PDLModules are the modules every kernel of which calls grid_dep_enter
// (common.cuh) before any dependent access, so that runtime/cuda may launch
// them with programmatic dependent launch: a captured step's kernels, and
// the op-by-op ones (a batched prefill's; tuning.noPrefillPDL turns them off). TestPDLModulesWait checks the
// PTX of each.
var PDLModules = []string{"matvec_f16", "matvec_rope", "matvec_w4a16", "experts_grouped", "experts_fused", "experts_tc",
	"experts_routed", "norm", "elementwise", "rope_attention", "router", "embed_argmax", "decode", "matmul_tc", "prefill_rows",
	"prefill_attention"}
