package cuda

import (
	"regexp"
	"slices"
	"testing"

	"github.com/horizon-runmap/horizon/kernels"
)

// ptxEntry matches a kernel's declaration in PTX.
var ptxEntry = regexp.MustCompile(`(?m)^\.(?:visible )?\.entry ([A-Za-z_][A-Za-z0-9_]*)\(`)

// TestModuleFuncsCoverPTX checks, without a GPU, that moduleFuncs and the
// embedded PTX name the same kernels module by module: a kernel compiled
// but not listed is never looked up (a launch of it fails only at Open on a
// GPU, as session 31's first device call did), and one listed but not
// compiled fails Open.
func TestModuleFuncsCoverPTX(t *testing.T) {
	mods := kernels.Modules()
	if len(mods) == 0 {
		t.Fatal("no embedded PTX modules")
	}
	for _, m := range mods {
		t.Run(m, func(t *testing.T) {
			ptx, err := kernels.PTX(m)
			if err != nil {
				t.Fatal(err)
			}
			var entries []string
			for _, g := range ptxEntry.FindAllStringSubmatch(ptx, -1) {
				entries = append(entries, g[1])
			}
			listed, ok := moduleFuncs[m]
			if !ok {
				t.Fatalf("module %s (%d entries) is not in moduleFuncs", m, len(entries))
			}
			for _, e := range entries {
				if !slices.Contains(listed, e) {
					t.Errorf("module %s: PTX entry %s is not in moduleFuncs", m, e)
				}
			}
			for _, n := range listed {
				if !slices.Contains(entries, n) {
					t.Errorf("module %s: moduleFuncs lists %s, which its PTX does not declare", m, n)
				}
			}
		})
	}
	for m := range moduleFuncs {
		if !slices.Contains(mods, m) {
			t.Errorf("moduleFuncs names module %s, which is not embedded", m)
		}
	}
}
