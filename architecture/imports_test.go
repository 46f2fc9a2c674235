package architecture

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/horizon-runmap/horizon/"

// deps lists the module's packages pkg depends on (go list -deps), with
// the build tags given.
func deps(t *testing.T, pkg string, tags ...string) []string {
	t.Helper()
	args := []string{"list", "-deps"}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	out, err := exec.Command("go", append(args, "../"+pkg)...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, ee.Stderr)
		}
		t.Skipf("go list: %v", err)
	}
	var own []string
	for _, l := range strings.Fields(string(out)) {
		if p, ok := strings.CutPrefix(l, module); ok {
			own = append(own, p)
		}
	}
	return own
}

// TestImportRules: each package's dependencies stay on its side of the
// design's lines (docs/ARCHITECTURE.md section 2).
func TestImportRules(t *testing.T) {
	for _, tc := range []struct {
		pkg       string
		tags      []string
		forbidden []string // package path prefixes it must not depend on
	}{
		{"runtime/cuda", []string{"cuda"}, []string{"runtime/engine", "runtime/cache", "campaigns"}},
		{"runtime/cpu", nil, []string{"runtime/engine", "runtime/cache", "runtime/device", "campaigns"}},
		{"runtime/plan", nil, []string{"runtime/engine", "runtime/cache", "runtime/backend", "runtime/cuda", "runtime/cpu"}},
		{"runtime/device", nil, []string{"runtime/engine", "runtime/cache", "runtime/cuda", "runtime/cpu"}},
		{"runtime/cache", nil, []string{"runtime/engine", "runtime/cuda", "runtime/cpu"}},
		{"campaigns", nil, []string{"runtime/", "campaigns/worker", "campaigns/slurm"}},
		{"campaigns/report", nil, []string{"runtime/", "campaigns/worker", "ceilings"}},
		{"campaigns/compare", nil, []string{"runtime/", "campaigns/worker"}},
		// campaigns/slurm speaks to Slurm's client commands for the runner;
		// it never touches the runtime, and the runner never imports it.
		{"campaigns/slurm", nil, []string{"runtime/", "campaigns/worker"}},
		{"verifier", nil, []string{"runtime/", "campaigns"}},
		// ceilings computes the reports' bounds for the runner and the
		// verifier alike, from raw records and modelspec's shapes.
		{"ceilings", nil, []string{"runtime/", "campaigns"}},
		// modelspec (architectures, presets, tensor specs) is a leaf.
		{"modelspec", nil, []string{"runtime/", "campaigns", "editions", "verifier", "contracts", "schemas", "ceilings", "eviction", "cmd/"}},
		{"cmd/horizon-verify", nil, []string{"runtime/", "campaigns"}},
		// fidelity computes the paired measures for the report writer and
		// the verifier alike, from retained values only.
		{"fidelity", nil, []string{"runtime/", "campaigns", "verifier", "cmd/"}},
		// eviction is a leaf (policies, placements, the replay of recorded
		// routing) shared by the cache and the verifier.
		{"eviction", nil, []string{"runtime/", "campaigns", "editions", "verifier", "contracts", "schemas", "cmd/"}},
	} {
		t.Run(tc.pkg, func(t *testing.T) {
			for _, d := range deps(t, tc.pkg, tc.tags...) {
				if d == tc.pkg {
					continue
				}
				for _, f := range tc.forbidden {
					if d == strings.TrimSuffix(f, "/") || strings.HasPrefix(d, f) && strings.HasSuffix(f, "/") || strings.HasPrefix(d, f+"/") {
						t.Errorf("%s depends on %s (forbidden: %s)", tc.pkg, d, f)
					}
				}
			}
		})
	}
}
