package verifier

import (
	"testing"

	"github.com/horizon-runmap/horizon/editions"
)

// The dense activations family of consistent forgeries: the dtype a
// worker's dense projections took their batched-prefill activations in
// (artifact.dense_activation_dtype; absent means FP32) against its
// campaign configuration's dense_activations.
// TestForgeriesOnCommittedEditions runs them on every committed edition.
func init() {
	forgeries = append(forgeries,
		forgery{family: "activations", name: "dense_activation_dtype flipped in one worker", want: IDPhysDenseActDType, apply: forgeDenseOneWorker},
		forgery{family: "activations", name: "dense_activation_dtype flipped in every worker of a configuration, every aggregate re-derived", want: IDPhysDenseActDType, apply: forgeDenseConfiguration},
		forgery{family: "activations", name: "a configuration's declared dense_activations changed in the campaign, refrozen", want: IDPhysDenseActDType, apply: forgeDenseCampaign},
	)
}

// flipDense turns a raw record's artifact.dense_activation_dtype into the
// other dtype as a worker writes it: FP16 where it is absent (FP32), and
// absent where it is FP16 (workers leave FP32 out).
func flipDense(t *testing.T, d map[string]any) {
	a := obj(t, d, "artifact")
	if a["dense_activation_dtype"] == editions.ExpertActFP16 {
		delete(a, "dense_activation_dtype")
	} else {
		a["dense_activation_dtype"] = editions.ExpertActFP16
	}
}

// forgeDenseOneWorker flips the last block's dense_activation_dtype of the
// first configuration.
func forgeDenseOneWorker(t *testing.T, dir string) { forgeFlipOneWorker(t, dir, flipDense) }

// forgeDenseConfiguration flips every block of the first configuration, so
// its workers agree, and its configuration document's artifact with them
// (reaggregate re-derives the metrics only), so that check recompute's
// artifact comparison stays quiet and the reports, re-rendered, show the
// dense activations column.
func forgeDenseConfiguration(t *testing.T, dir string) {
	edit(t, dir, editions.ConfigPath(configIDs(t, dir)[0]), func(d map[string]any) { flipDense(t, d) })
	forgeFlipConfiguration(t, dir, flipDense)
}

// forgeDenseCampaign changes the first configuration's declared
// dense_activations in the frozen campaign (fp16 where it declares none or
// fp32; none where it declares fp16, as the runner freezes fp32) and
// refreezes it: the records no longer ran what the campaign says.
func forgeDenseCampaign(t *testing.T, dir string) {
	edit(t, dir, editions.CampaignFile, func(d map[string]any) {
		c := arr(t, d, "campaign", "configurations")[0].(map[string]any)
		if c["dense_activations"] == "fp16" {
			delete(c, "dense_activations")
		} else {
			c["dense_activations"] = "fp16"
		}
	})
	forge(t, dir)
}
