//go:build cuda

package cuda

import (
	"fmt"
	"testing"

	"gorgonia.org/cu"
)

// TestKernelResources logs what the driver's JIT made of the row kernels on
// this GPU (registers, local memory, resident blocks per SM at a typical
// shared-memory size): the build machine's ptxas 11.8 numbers in
// kernels/NOTES.md are a guide, these are the ones that set occupancy.
// The tensor-core prefill kernels are designed for 2 blocks an SM (their
// shared memory is sized for it: matmul_tc.cu), the small-entry
// fragment-direct build for 3; one that gets fewer fails.
func TestKernelResources(t *testing.T) {
	be := testBE
	type kern struct {
		name    string
		fn      cu.Function
		smem    int
		threads int // 0: block
	}
	// Blocks an SM the tensor-core prefill kernels are designed for.
	designed := map[string]int{}
	var ks []kern
	err := be.o.do(func() error {
		k := &be.k
		for i, nr := range f16NR {
			ks = append(ks, kern{fmt.Sprintf("matvec_f16_r%d_s", nr), k.matvecF16[i][0], xsBytes(2048), 0})
		}
		for i, nr := range w4NR {
			ks = append(ks, kern{fmt.Sprintf("matvec_w4a16_r%d_s", nr), k.matvecW4[i][0], xs4Bytes(2048), 0})
		}
		for i, nrp := range gateUpNRP {
			ks = append(ks, kern{fmt.Sprintf("experts_gateup_int4_p%d_s", nrp), k.gateup[0][i][0], xs4Bytes(2048), 0})
		}
		for i, dv := range downVariants {
			ks = append(ks, kern{"experts_down_int4_" + dv.suffix + "_s", k.down[0][i][0], 8*xs4Bytes(1024) + 8*4*16, 0})
		}
		ks = append(ks, kern{"experts_moe_int4_t", k.moeInt4T, 8*xs4Bytes(1024) + 8*4*downMaxTile, 0})
		ks = append(ks, kern{"stream_read", k.streamRead, 0, 0})
		// Batched prefill's grouped int4 expert matmul, two-stage and with
		// the cp.async ring (the default; tuning.tcNoRing) and its
		// two-chunk twin (tuning.tcRing2), and the FP16
		// split-K, plain and with its ring (tuning.tcRingF16).
		ks = append(ks, kern{"matmul_tc_grouped_w4a16", k.matmulTCGrouped[0], tcSmem, tcThreads},
			kern{"matmul_tc_grouped_ring_w4a16", k.matmulTCGroupedRing[0], tcSmemRing, tcThreads},
			kern{"matmul_tc_grouped_pre_ring_w4a16", k.matmulTCGroupedRing[1], tcSmemRing, tcThreads},
			kern{"matmul_tc_grouped_ring2_w4a16", k.matmulTCGroupedRing2[0], tcSmemRing2, tcThreads},
			kern{"matmul_tc_grouped_pre_ring2_w4a16", k.matmulTCGroupedRing2[1], tcSmemRing2, tcThreads},
			kern{"matmul_tc_grouped_pre_ring_narrow_w4a16", k.matmulTCGroupedNarrow[0][1], tcSmemRing, tcThreads},
			kern{"matmul_tc_grouped_pre_ring2_narrow_w4a16", k.matmulTCGroupedNarrow[1][1], tcSmemRing2, tcThreads},
			kern{"matmul_tc_grouped_pre_fd_w4a16", k.matmulTCGroupedFD, tcSmemFD, tcThreads},
			kern{"matmul_tc_grouped_pre_fd_gu_w4a16", k.matmulTCGroupedGU[0], tcSmemFD, tcThreads},
			kern{"matmul_tc_grouped_pre_fd_a16_w4a16", k.matmulTCGroupedA16[0], tcSmemFD, tcThreads},
			kern{"matmul_tc_grouped_pre_fd_gu_a16_w4a16", k.matmulTCGroupedGUA16[0], tcSmemFD, tcThreads},
			kern{"matmul_tc_grouped_pre_fd_a16r_w4a16", k.matmulTCGroupedA16R[0], tcSmemFD, tcThreads},
			kern{"matmul_tc_grouped_pre_fd_gu_a16r_w4a16", k.matmulTCGroupedGUA16R[0], tcSmemFD, tcThreads},
			kern{"matmul_tc_f16_pre_splitk_fd", k.matmulTCSplitKFD, tcSmemFD, tcThreads},
			kern{"matmul_tc_f16_pre_splitk_burst", k.matmulTCSplitKBurst, tcSmemBurst, tcThreads},
			kern{"matmul_tc_f16_pre_splitk_burst_a16", k.matmulTCSplitKBurstA16, tcSmemBurst, tcThreads},
			kern{"matmul_tc_f16_splitk", k.matmulTCSplitK, tcSmem, tcThreads},
			kern{"matmul_tc_f16_splitk_ring", k.matmulTCSplitKRing, tcSmemRingF16, tcThreads})
		for _, kk := range ks {
			if kk.threads == tcThreads {
				designed[kk.name] = 2
			}
		}
		// The small-entry fragment-direct build (tcGroupedFD16) is built for
		// three (80 registers on ptxas 11.8, 17.5 KB of staging).
		ks = append(ks, kern{"matmul_tc_grouped_pre_fd16_w4a16", k.matmulTCGroupedFD16, tcSmemFD16, tcThreads},
			kern{"matmul_tc_grouped_pre_fd16_gu_w4a16", k.matmulTCGroupedGU[1], tcSmemFD16, tcThreads},
			kern{"matmul_tc_grouped_pre_fd16_s3_w4a16", k.matmulTCGroupedFD16S3, tcSmemFD16S3, tcThreads},
			kern{"matmul_tc_grouped_pre_fd16_gu_s3_w4a16", k.matmulTCGroupedGU[2], tcSmemFD16S3, tcThreads},
			kern{"matmul_tc_grouped_pre_fd16_a16_w4a16", k.matmulTCGroupedA16[1], tcSmemFD16, tcThreads},
			kern{"matmul_tc_grouped_pre_fd16_gu_a16_w4a16", k.matmulTCGroupedGUA16[1], tcSmemFD16, tcThreads},
			kern{"matmul_tc_grouped_pre_fd16_a16r_w4a16", k.matmulTCGroupedA16R[1], tcSmemFD16, tcThreads},
			kern{"matmul_tc_grouped_pre_fd16_gu_a16r_w4a16", k.matmulTCGroupedGUA16R[1], tcSmemFD16, tcThreads})
		for _, n := range []string{"matmul_tc_grouped_pre_fd16_w4a16", "matmul_tc_grouped_pre_fd16_gu_w4a16",
			"matmul_tc_grouped_pre_fd16_s3_w4a16", "matmul_tc_grouped_pre_fd16_gu_s3_w4a16",
			"matmul_tc_grouped_pre_fd16_a16_w4a16", "matmul_tc_grouped_pre_fd16_gu_a16_w4a16",
			"matmul_tc_grouped_pre_fd16_a16r_w4a16", "matmul_tc_grouped_pre_fd16_gu_a16r_w4a16"} {
			designed[n] = 3
		}
		// The tensor-core prefill attention (attnTC, the default over FP16 caches): 70.6 KB of
		// staging and 128 registers, three blocks of 4 warps an SM.
		ks = append(ks, kern{"attention_tc_rows_kv16", k.attentionTC, attTCSmem, attTCThreads})
		designed["attention_tc_rows_kv16"] = 3
		// The decode attention's ring (tuning.attRing): heads x attSplit
		// blocks are 256 on the Qwen1.5-MoE and OLMoE shapes, one wave only
		// at two blocks an SM.
		ks = append(ks, kern{"attention_ring_step_kv16", k.kv[1].attentionRingStep, attRingSmem, 0})
		designed["attention_ring_step_kv16"] = 2
		// attention_step at two blocks an SM, its b3 build at three
		// (tuning.attB3).
		ks = append(ks, kern{"attention_step_kv16", k.kv[1].attentionStep, 0, 0}, kern{"attention_b3_step_kv16", k.kv[1].attentionB3Step, 0, 0})
		designed["attention_step_kv16"], designed["attention_b3_step_kv16"] = 2, 3
		for _, kk := range ks {
			regs, err := kk.fn.Attribute(cu.NumRegs)
			if err != nil {
				return err
			}
			local, err := kk.fn.Attribute(cu.LocalSizeBytes)
			if err != nil {
				return err
			}
			threads := block
			if kk.threads != 0 {
				threads = kk.threads
			}
			per, err := blocksPerSM(kk.fn, threads, kk.smem)
			if err != nil {
				return err
			}
			t.Logf("%-40s %3d registers, %3d B local, %d blocks/SM at %6d B shared", kk.name, regs, local, per, kk.smem)
			if per < designed[kk.name] {
				t.Errorf("%s: %d blocks an SM at %d B of shared memory, designed for %d", kk.name, per, kk.smem, designed[kk.name])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
