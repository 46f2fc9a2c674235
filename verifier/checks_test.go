package verifier

import (
	"slices"
	"testing"
)

// The checks Verify runs are Checks less "edition" (reading the edition at
// all), in the same order: reports group findings by Checks, and
// horizon-verify --help describes and counts RunOrder.
func TestCheckRunOrder(t *testing.T) {
	if want := append([]string{"edition"}, RunOrder()...); !slices.Equal(Checks, want) {
		t.Fatalf("Checks %v, want \"edition\" then the checks Verify runs %v", Checks, RunOrder())
	}
}
