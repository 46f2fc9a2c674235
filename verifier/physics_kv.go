package verifier

import (
	"strconv"

	"github.com/horizon-runmap/horizon/editions"
)

// The KV cache is declared. A campaign configuration declares the KV
// cache's element type (kv: fp32 or fp16; absent means fp32), the worker
// loads the engine with it and the raw record states what the engine ran
// (artifact.kv_dtype: FP32 or FP16; absent, in records made before the
// field, means FP32). An FP16 cache halves the bytes a decode step reads
// at depth, and its tokens may differ from an FP32 cache's, so a forger
// who ran one and reports the other changes what a reader compares. Every
// worker's kv_dtype must be what its configuration declares, and one
// configuration's workers must agree (against the majority, where the
// campaign does not list the configuration: check contract reports that).
//
// What this cannot catch: a campaign rewritten together with every record
// of a configuration (check binding's --campaign FILE pins the frozen
// campaign to its YAML), or a run that declared FP32, ran FP16 and wrote
// FP32 (only the VRAM floor, physics_memory.go, and a reproduction's
// tokens speak to that).

var IDPhysKVDType = def("physics", "physics.kv-dtype", Error,
	"a worker's artifact.kv_dtype (absent: FP32) is not the KV cache element type its campaign configuration declares (kv; absent: fp32), or differs from the majority of its configuration's workers")

// campaignKV maps a campaign's kv to the raw record's kv_dtype.
var campaignKV = map[string]string{"": editions.KVFP32, "fp32": editions.KVFP32, "fp16": editions.KVFP16}

// declaredKV is the kv_dtype a configuration's kv declares; an unknown
// declaration names itself (the schema check reports it), so no record
// matches it.
func declaredKV(kv string) string {
	if d, ok := campaignKV[kv]; ok {
		return d
	}
	return "no known KV dtype (campaign kv " + strconv.Quote(kv) + ")"
}

func checkKVDType(v *view, fs *findings) {
	checkDeclaredDType(v, fs, declaredDType{
		id: IDPhysKVDType, pointer: "/artifact/kv_dtype", field: "kv", what: "KV cache",
		declared: func(cc campaignConfig) string { return cc.kv },
		want:     declaredKV,
		got:      func(r *editions.RawRecord) string { return r.Artifact.KVDTypeOf() },
	})
}
