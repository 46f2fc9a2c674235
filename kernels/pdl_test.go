package kernels

import (
	"regexp"
	"strings"
	"testing"
)

// TestPDLModulesWait: every kernel entry of a module runtime/cuda may
// launch with programmatic dependent launch (PDLModules) waits on its
// prerequisite grids (griddepcontrol.wait, grid_dep_wait) somewhere in its
// body; a kernel that did not could read its predecessor's outputs before
// they are written. (It checks presence, not that the wait comes before
// every dependent access: the sources say where.)
func TestPDLModulesWait(t *testing.T) {
	entry := regexp.MustCompile(`(?m)^\.(?:visible|weak) \.entry (\w+)\(`)
	for _, m := range PDLModules {
		ptx, err := PTX(m)
		if err != nil {
			t.Fatal(err)
		}
		locs := entry.FindAllStringSubmatchIndex(ptx, -1)
		if len(locs) == 0 {
			t.Fatalf("%s: no kernel entry in its PTX", m)
		}
		for i, l := range locs {
			end := len(ptx)
			if i+1 < len(locs) {
				end = locs[i+1][0]
			}
			if name := ptx[l[2]:l[3]]; !strings.Contains(ptx[l[0]:end], "griddepcontrol.wait") {
				t.Errorf("%s: kernel %s never waits on its prerequisite grids (griddepcontrol.wait)", m, name)
			}
		}
	}
}
