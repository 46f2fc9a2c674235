package verifier

import (
	"strconv"

	"github.com/horizon-runmap/horizon/editions"
)

// The routed experts' activation dtype is declared. A campaign
// configuration declares the dtype its routed experts' batched-prefill
// matmuls take their activations in (expert_activations: fp32 or fp16;
// absent means fp32), the worker loads the engine with it and the raw
// record states what the engine ran (artifact.expert_activation_dtype:
// FP16; absent, in an FP32 run's records and in records made before the
// field, means FP32). FP16 activations (INT4 experts, W4A16) change the
// prefill's speed and its logits, and so tokens, so a forger who ran one
// and reports the other changes what a reader compares. Every worker's
// expert_activation_dtype must be what its configuration declares, and
// one configuration's workers must agree (against the majority, where the
// campaign does not list the configuration: check contract reports that).
// FP16 is also held to what it applies to, as the runtime refuses it
// elsewhere: INT4 experts (artifact.expert_format qpack-int4-b256-v1) and
// a batched prefill (setup.prefill batched; absent means token at a time).
//
// What this cannot catch: a campaign rewritten together with every record
// of a configuration (check binding's --campaign FILE pins the frozen
// campaign to its YAML), or a run that declared FP32, ran FP16 and wrote
// FP32 (only a reproduction's tokens speak to that: FP16 activations give
// other logits than FP32's).

var IDPhysExpertActDType = def("physics", "physics.expert-activation-dtype", Error,
	"a worker's artifact.expert_activation_dtype (absent: FP32) is not the expert activation dtype its campaign configuration declares (expert_activations; absent: fp32), or differs from the majority of its configuration's workers, or is FP16 without INT4 experts and a batched prefill")

// campaignExpertAct maps a campaign's expert_activations to the raw
// record's expert_activation_dtype.
var campaignExpertAct = map[string]string{"": editions.ExpertActFP32, "fp32": editions.ExpertActFP32, "fp16": editions.ExpertActFP16}

// declaredExpertAct is the expert_activation_dtype a configuration's
// expert_activations declares; an unknown declaration names itself (the
// schema check reports it), so no record matches it.
func declaredExpertAct(act string) string {
	if d, ok := campaignExpertAct[act]; ok {
		return d
	}
	return "no known expert activation dtype (campaign expert_activations " + strconv.Quote(act) + ")"
}

func checkExpertActDType(v *view, fs *findings) {
	for _, c := range v.configs {
		for _, w := range c.workers {
			r := w.rec
			if r.Artifact.ExpertActivationDTypeOf() != editions.ExpertActFP16 {
				continue
			}
			if int4 := campaignExpertFormats["int4"]; r.Artifact.ExpertFormat != int4 {
				fs.add(IDPhysExpertActDType, w.path, "/artifact/expert_activation_dtype", editions.ExpertActFP32, r.Artifact.ExpertActivationDType,
					"the worker states FP16 expert activations with %s experts; they apply to %s experts only (W4A16), and the runtime refuses them elsewhere", r.Artifact.ExpertFormat, int4)
			}
			if r.Setup.Prefill != "batched" {
				fs.add(IDPhysExpertActDType, w.path, "/artifact/expert_activation_dtype", editions.ExpertActFP32, r.Artifact.ExpertActivationDType,
					"the worker states FP16 expert activations with prefill %s; they apply to a batched prefill's expert matmuls, and the runtime refuses them with a token-at-a-time prefill", orDefault(r.Setup.Prefill, "token (absent)"))
			}
		}
	}
	checkDeclaredDType(v, fs, declaredDType{
		id: IDPhysExpertActDType, pointer: "/artifact/expert_activation_dtype", field: "expert_activations", what: "expert activations",
		declared: func(cc campaignConfig) string { return cc.expertAct },
		want:     declaredExpertAct,
		got:      func(r *editions.RawRecord) string { return r.Artifact.ExpertActivationDTypeOf() },
	})
}
