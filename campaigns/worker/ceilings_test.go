package worker

import (
	"strings"
	"testing"
)

// TestCeilingsSection: a cuda edition's report gets package ceilings'
// sections at level 3 from the raw records; a directory without records
// gets a line that says why, never a failure.
func TestCeilingsSection(t *testing.T) {
	md := Runtime{}.CeilingsSection("../../editions/technical-preview-v3")
	for _, want := range []string{"### Decode against the HBM and PCIe ceilings", "### Partial residency against full residency",
		"### Whole-worker VRAM", "olmoe-0924-c64", "| 3684 |"} {
		if !strings.Contains(md, want) {
			t.Errorf("ceilings section lacks %q", want)
		}
	}
	if strings.Contains(md, "\n## ") || strings.HasPrefix(md, "# ") {
		t.Error("ceilings section uses a heading level above 3")
	}
	if got := (Runtime{}).CeilingsSection(t.TempDir()); !strings.HasPrefix(got, "Not computed: ") {
		t.Errorf("empty directory: %q", got)
	}
}
