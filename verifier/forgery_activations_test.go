package verifier

import (
	"testing"

	"github.com/horizon-runmap/horizon/editions"
)

// The expert activations family of consistent forgeries: the dtype a
// worker's routed experts took their batched-prefill activations in
// (artifact.expert_activation_dtype; absent means FP32) against its
// campaign configuration's expert_activations.
// TestForgeriesOnCommittedEditions runs them on every committed edition.
func init() {
	forgeries = append(forgeries,
		forgery{family: "activations", name: "expert_activation_dtype flipped in one worker", want: IDPhysExpertActDType, apply: forgeActOneWorker},
		forgery{family: "activations", name: "expert_activation_dtype flipped in every worker of a configuration, every aggregate re-derived", want: IDPhysExpertActDType, apply: forgeActConfiguration},
		forgery{family: "activations", name: "a configuration's declared expert_activations changed in the campaign, refrozen", want: IDPhysExpertActDType, apply: forgeActCampaign},
	)
}

// flipAct turns a raw record's artifact.expert_activation_dtype into the
// other dtype as a worker writes it: FP16 where it is absent (FP32), and
// absent where it is FP16 (workers leave FP32 out).
func flipAct(t *testing.T, d map[string]any) {
	a := obj(t, d, "artifact")
	if a["expert_activation_dtype"] == editions.ExpertActFP16 {
		delete(a, "expert_activation_dtype")
	} else {
		a["expert_activation_dtype"] = editions.ExpertActFP16
	}
}

// forgeActOneWorker flips the last block's expert_activation_dtype of the
// first configuration.
func forgeActOneWorker(t *testing.T, dir string) { forgeFlipOneWorker(t, dir, flipAct) }

// forgeActConfiguration flips every block of the first configuration, so
// its workers agree and its configuration document follows them.
func forgeActConfiguration(t *testing.T, dir string) { forgeFlipConfiguration(t, dir, flipAct) }

// forgeActCampaign changes the first configuration's declared
// expert_activations in the frozen campaign (fp16 where it declares none
// or fp32; none where it declares fp16, as the runner freezes fp32) and
// refreezes it: the records no longer ran what the campaign says.
func forgeActCampaign(t *testing.T, dir string) {
	edit(t, dir, editions.CampaignFile, func(d map[string]any) {
		c := arr(t, d, "campaign", "configurations")[0].(map[string]any)
		if c["expert_activations"] == "fp16" {
			delete(c, "expert_activations")
		} else {
			c["expert_activations"] = "fp16"
		}
	})
	forge(t, dir)
}
