package verifier

import (
	"encoding/json"
	"testing"

	"github.com/horizon-runmap/horizon/editions"
	"github.com/horizon-runmap/horizon/runtime/model"
)

// The KV family of consistent forgeries: the KV cache element type a
// worker ran (artifact.kv_dtype) against its campaign configuration's kv,
// and the VRAM floor that includes the KV cache. make depth-smoke-check
// runs them on a fresh editions/depth-smoke-cpu (kv fp16 throughout),
// TestForgeriesOnCommittedEditions on every committed edition (the VRAM
// one applies to the cuda editions only).
func init() {
	forgeries = append(forgeries,
		forgery{family: "kv", name: "kv_dtype flipped in one worker", want: IDPhysKVDType, apply: forgeKVOneWorker},
		forgery{family: "kv", name: "kv_dtype flipped in every worker of a configuration, every aggregate re-derived", want: IDPhysKVDType, apply: forgeKVConfiguration},
		forgery{family: "kv", name: "a configuration's declared kv changed in the campaign, refrozen", want: IDPhysKVDType, apply: forgeKVCampaign},
		forgery{family: "kv", name: "VRAM peaks lowered above the placement but below placement + KV cache", want: IDPhysVRAMFloor, apply: forgeVRAMFloorKV},
	)
}

// flipKV turns a raw record's artifact.kv_dtype into the other element
// type (absent reads as FP32, so it becomes FP16).
func flipKV(t *testing.T, d map[string]any) {
	a := obj(t, d, "artifact")
	if a["kv_dtype"] == editions.KVFP16 {
		a["kv_dtype"] = editions.KVFP32
	} else {
		a["kv_dtype"] = editions.KVFP16
	}
}

// forgeKVOneWorker flips the last block's kv_dtype of the first
// configuration.
func forgeKVOneWorker(t *testing.T, dir string) { forgeFlipOneWorker(t, dir, flipKV) }

// forgeKVConfiguration flips every block of the first configuration, so
// its workers agree and its configuration document follows them.
func forgeKVConfiguration(t *testing.T, dir string) { forgeFlipConfiguration(t, dir, flipKV) }

// forgeFlipOneWorker applies flip to the last block's raw record of the
// first configuration and re-derives everything (forge).
func forgeFlipOneWorker(t *testing.T, dir string, flip func(*testing.T, map[string]any)) {
	paths, docs := rawTrees(t, dir, configIDs(t, dir)[0])
	last := len(docs) - 1
	flip(t, docs[last])
	writeRaw(t, dir, paths[last], docs[last])
	forge(t, dir)
}

// forgeFlipConfiguration applies flip to every block's raw record of the
// first configuration, so its workers agree, and re-derives everything.
func forgeFlipConfiguration(t *testing.T, dir string, flip func(*testing.T, map[string]any)) {
	paths, docs := rawTrees(t, dir, configIDs(t, dir)[0])
	for i, d := range docs {
		flip(t, d)
		writeRaw(t, dir, paths[i], d)
	}
	forge(t, dir)
}

// forgeKVCampaign changes the first configuration's declared kv in the
// frozen campaign (fp16 where it declares none or fp32; none where it
// declares fp16, as the runner freezes fp32) and refreezes it: the records
// no longer ran what the campaign says.
func forgeKVCampaign(t *testing.T, dir string) {
	edit(t, dir, editions.CampaignFile, func(d map[string]any) {
		c := arr(t, d, "campaign", "configurations")[0].(map[string]any)
		if c["kv"] == "fp16" {
			delete(c, "kv")
		} else {
			c["kv"] = "fp16"
		}
	})
	forge(t, dir)
}

// forgeVRAMFloorKV lowers a cuda worker's VRAM peaks (device and process,
// and the timeline behind them) to above the experts it placed but below
// placed + its KV cache, computed here from runtime/model's preset: the
// forger who knows the expert floor and hides the KV cache's bytes.
func forgeVRAMFloorKV(t *testing.T, dir string) {
	for _, id := range configIDs(t, dir) {
		for _, p := range rawPathsOf(t, dir, id) {
			d := readTree(t, dir, p)
			o := obj(t, d, "observations")
			if at(t, d, "environment", "device") != "cuda" || at(t, d, "checkpoint", "kind") != "synthetic" {
				continue
			}
			if _, ok := o["vram_peak_bytes"].(json.Number); !ok {
				continue
			}
			pre, err := model.LookupPreset(at(t, d, "checkpoint", "arch").(string))
			if err != nil {
				continue
			}
			elem := int64(4)
			if obj(t, d, "artifact")["kv_dtype"] == editions.KVFP16 {
				elem = 2
			}
			var positions int64
			for _, q := range arr(t, d, "requests") {
				q := q.(map[string]any)
				positions = max(positions, numInt(t, q["prompt_tokens"])+numInt(t, q["n"]))
			}
			if mp, ok := obj(t, d, "setup", "model")["max_positions"].(json.Number); ok {
				positions = min(positions, numInt(t, mp))
			}
			kv := int64(pre.Config.NumLayers) * 2 * int64(pre.Config.KVDim()) * positions * elem
			placed := numInt(t, at(t, d, "preparation", "h2d_bytes"))
			dev, proc := placed+kv/2, placed+kv/4
			if kv/4 == 0 {
				continue
			}
			lowerVRAM(t, o, dev, proc)
			writeRaw(t, dir, p, d)
			forge(t, dir)
			return
		}
	}
	t.Skip("no cuda worker of a synthetic preset with an observed VRAM peak")
}
