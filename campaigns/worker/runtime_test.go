package worker

import (
	"slices"
	"testing"

	"github.com/horizon-runmap/horizon/campaigns"
	"github.com/horizon-runmap/horizon/runtime/cache"
	"github.com/horizon-runmap/horizon/runtime/engine"
)

// TestRuntimeNamesMatchCampaigns pins the mode names package campaigns
// spells (so that it need not import runtime/) to the runtime's own, and
// checks that each is one the runtime lists.
func TestRuntimeNamesMatchCampaigns(t *testing.T) {
	n := Runtime{}.Names()
	for _, tc := range []struct {
		name, campaigns, runtime string
		list                     []string
	}{
		{"default transport", campaigns.TransportStaged, cache.DefaultTransport, n.Transports},
		{"staged transport", campaigns.TransportStaged, cache.TransportStaged, n.Transports},
		{"registered transport", campaigns.TransportRegistered, cache.TransportRegistered, n.Transports},
		{"prefetch off", campaigns.PrefetchOff, engine.PrefetchOff, n.Prefetch},
		{"prefetch next-layer", campaigns.PrefetchNextLayer, engine.PrefetchNextLayer, n.Prefetch},
		{"overlap off", campaigns.OverlapOff, engine.OverlapOff, n.Overlap},
		{"overlap hit-compute", campaigns.OverlapHitCompute, engine.OverlapHitCompute, n.Overlap},
		{"step mode auto", campaigns.StepAuto, "auto", n.StepModes},
		{"step mode ops", campaigns.StepOps, engine.StepOps, n.StepModes},
		{"step mode graph-full", campaigns.StepGraphFull, engine.StepGraphFull, n.StepModes},
		{"step mode graph-segmented", campaigns.StepGraphSegmented, engine.StepGraphSegmented, n.StepModes},
		{"step mode persistent", campaigns.StepPersistent, engine.StepPersistent, n.StepModes},
		{"kv fp32", campaigns.KVFP32, "fp32", n.KV},
		{"kv fp16", campaigns.KVFP16, "fp16", n.KV},
		{"expert activations fp32", campaigns.ExpertActFP32, engine.ExpertActFP32, n.ExpertActivations},
		{"expert activations fp16", campaigns.ExpertActFP16, engine.ExpertActFP16, n.ExpertActivations},
		{"dense activations fp32", campaigns.DenseActFP32, engine.ExpertActFP32, n.DenseActivations},
		{"dense activations fp16", campaigns.DenseActFP16, engine.ExpertActFP16, n.DenseActivations},
	} {
		if tc.campaigns != tc.runtime {
			t.Errorf("%s: campaigns says %q, the runtime %q", tc.name, tc.campaigns, tc.runtime)
		}
		if !slices.Contains(tc.list, tc.campaigns) {
			t.Errorf("%s: %q is not among the runtime's %v", tc.name, tc.campaigns, tc.list)
		}
	}
	if len(n.Executors) == 0 || len(n.Placements) == 0 || len(n.Policies) == 0 {
		t.Errorf("empty name lists: %+v", n)
	}
}
