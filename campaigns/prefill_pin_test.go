package campaigns

import (
	"slices"
	"testing"

	"github.com/horizon-runmap/horizon/editions"
)

// TestPinPrefill: a worker's --prefill pins a configuration that leaves
// prefill auto, keeps one that declares the same mode, and refuses one that
// declares another or a mode that is not one, and refuses to pin token
// prefill on a configuration that declares FP16 expert or dense
// activations (they apply to a batched prefill); the campaign's configuration itself is
// never changed. A reproduction pins the original record's mode
// where the configuration leaves it auto (rerunPrefill).
func TestPinPrefill(t *testing.T) {
	for _, tc := range []struct {
		declared, pin, want string
		fails               bool
		act                 string // expert_activations
		dense               string // dense_activations
	}{
		{"", "", "", false, "", ""},
		{"", "token", "token", false, "", ""},
		{"auto", "batched", "batched", false, "", ""},
		{"batched", "batched", "batched", false, "", ""},
		{"batched", "token", "", true, "", ""},
		{"token", "batched", "", true, "", ""},
		{"", "auto", "", true, "", ""},
		{"", "fast", "", true, "", ""},
		{"", "batched", "batched", false, ExpertActFP16, ""},
		{"", "", "", false, ExpertActFP16, ""},
		{"", "token", "", true, ExpertActFP16, ""},
		{"auto", "token", "", true, ExpertActFP16, ""},
		{"", "batched", "batched", false, "", DenseActFP16},
		{"", "", "", false, "", DenseActFP16},
		{"", "token", "", true, "", DenseActFP16},
		{"auto", "token", "", true, "", DenseActFP16},
		{"", "token", "token", false, "", DenseActFP32},
	} {
		cfg := &Configuration{ID: "c", Prefill: tc.declared, ExpertActivations: tc.act, DenseActivations: tc.dense}
		got, err := PinPrefill(cfg, tc.pin)
		if (err != nil) != tc.fails {
			t.Fatalf("declared %q, pin %q: error %v, want failure %v", tc.declared, tc.pin, err, tc.fails)
		}
		if err == nil && got.Prefill != tc.want {
			t.Errorf("declared %q, pin %q: runs %q, want %q", tc.declared, tc.pin, got.Prefill, tc.want)
		}
		if cfg.Prefill != tc.declared {
			t.Errorf("declared %q, pin %q: the campaign's configuration changed to %q", tc.declared, tc.pin, cfg.Prefill)
		}
	}
	for _, tc := range []struct{ declared, recorded, want string }{
		{"", "token", "token"},         // a raw version 2 record on cuda: auto ran token at a time
		{"auto", "batched", "batched"}, // the same rule as now
		{"", "", "token"},              // a record from before the field: it ran token at a time
		{"batched", "batched", ""},     // declared: nothing to pin
	} {
		r := &editions.RawRecord{}
		r.Setup.Prefill = tc.recorded
		if got := rerunPrefill(&Configuration{Prefill: tc.declared}, r); got != tc.want {
			t.Errorf("declared %q, recorded %q: a rerun pins %q, want %q", tc.declared, tc.recorded, got, tc.want)
		}
	}
}

// TestWorkerArgsPrefillFlag: a pinned prefill reaches the worker process,
// launched directly or as an array task, and an unpinned one adds no flag.
func TestWorkerArgsPrefillFlag(t *testing.T) {
	for _, pin := range []string{"", "token"} {
		a := WorkerArgs{Campaign: "c.json", Contract: "k.json", Config: "x", Block: 1, Artifact: "a", Out: "o", Prefill: pin}
		for name, flags := range map[string][]string{"direct": a.Flags(), "array task": TaskWorker{Args: a, Key: "k"}.TaskFlags("run", "sha")} {
			i := slices.Index(flags, "--prefill")
			switch {
			case pin == "" && i >= 0:
				t.Errorf("%s: an unpinned worker gets --prefill: %v", name, flags)
			case pin != "" && (i < 0 || i+1 >= len(flags) || flags[i+1] != pin):
				t.Errorf("%s: a worker pinned to %s gets %v", name, pin, flags)
			}
		}
	}
}
