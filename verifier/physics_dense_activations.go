package verifier

import (
	"strconv"

	"github.com/horizon-runmap/horizon/editions"
)

// The dense projections' activation dtype is declared. A campaign
// configuration declares the dtype a batched prefill's dense FP16
// projections (attention's q, k, v and o; the shared expert's gate, up and
// down) take their activations in (dense_activations: fp32 or fp16; absent
// means fp32), the worker loads the engine with it and the raw record
// states what the engine ran (artifact.dense_activation_dtype: FP16;
// absent, in an FP32 run's records and in records made before the field,
// means FP32). FP16 activations (each row rounded to FP16 at one
// power-of-two shift a 32-value chunk) change the prefill's speed and its
// logits, and so tokens, so a forger who ran one and reports the other
// changes what a reader compares. Every worker's dense_activation_dtype
// must be what its configuration declares, and one configuration's
// workers must agree (against the majority, where the campaign does not
// list the configuration: check contract reports that). FP16 is also held
// to what it applies to, as the runtime refuses it elsewhere: a batched
// prefill (setup.prefill batched; absent means token at a time). Unlike
// the expert activations' FP16, it does not need INT4 experts: the dense
// projections are FP16 matrices whatever the expert format.
//
// What this cannot catch: a campaign rewritten together with every record
// of a configuration (check binding's --campaign FILE pins the frozen
// campaign to its YAML), or a run that declared FP32, ran FP16 and wrote
// FP32 (only a reproduction's tokens speak to that: FP16 activations give
// other logits than FP32's).

var IDPhysDenseActDType = def("physics", "physics.dense-activation-dtype", Error,
	"a worker's artifact.dense_activation_dtype (absent: FP32) is not the dense activation dtype its campaign configuration declares (dense_activations; absent: fp32), or differs from the majority of its configuration's workers, or is FP16 without a batched prefill")

// campaignDenseAct maps a campaign's dense_activations to the raw record's
// dense_activation_dtype (the expert activations' spellings).
var campaignDenseAct = map[string]string{"": editions.ExpertActFP32, "fp32": editions.ExpertActFP32, "fp16": editions.ExpertActFP16}

// declaredDenseAct is the dense_activation_dtype a configuration's
// dense_activations declares; an unknown declaration names itself (the
// schema check reports it), so no record matches it.
func declaredDenseAct(act string) string {
	if d, ok := campaignDenseAct[act]; ok {
		return d
	}
	return "no known dense activation dtype (campaign dense_activations " + strconv.Quote(act) + ")"
}

func checkDenseActDType(v *view, fs *findings) {
	for _, c := range v.configs {
		for _, w := range c.workers {
			r := w.rec
			if r.Artifact.DenseActivationDTypeOf() != editions.ExpertActFP16 {
				continue
			}
			if r.Setup.Prefill != "batched" {
				fs.add(IDPhysDenseActDType, w.path, "/artifact/dense_activation_dtype", editions.ExpertActFP32, r.Artifact.DenseActivationDType,
					"the worker states FP16 dense activations with prefill %s; they apply to a batched prefill's dense projections, and the runtime refuses them with a token-at-a-time prefill", orDefault(r.Setup.Prefill, "token (absent)"))
			}
		}
	}
	checkDeclaredDType(v, fs, declaredDType{
		id: IDPhysDenseActDType, pointer: "/artifact/dense_activation_dtype", field: "dense_activations", what: "dense activations",
		declared: func(cc campaignConfig) string { return cc.denseAct },
		want:     declaredDenseAct,
		got:      func(r *editions.RawRecord) string { return r.Artifact.DenseActivationDTypeOf() },
	})
}
