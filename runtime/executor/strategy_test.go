package executor

import (
	"slices"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/cpu"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// TestNamesAreDistinctStrategies: each executor New accepts is a distinct
// launch structure, and every Strategy has exactly one executor, so no name
// is another's steps under a new label (issue 13: real or gone).
func TestNamesAreDistinctStrategies(t *testing.T) {
	be := cpu.New(1)
	layout, err := qpack.NewRecordLayout(qpack.SchemeInt4, 256, 256)
	if err != nil {
		t.Fatal(err)
	}
	var got []Strategy
	for _, name := range Names() {
		ex, err := New(name, be, layout, 4)
		if err != nil {
			t.Fatal(err)
		}
		if ex.Name() != name {
			t.Errorf("New(%q).Name() = %q", name, ex.Name())
		}
		s := ex.Strategy()
		if !s.Valid() {
			t.Errorf("%s: strategy %v is not one of %v", name, s, Strategies())
		}
		if slices.Contains(got, s) {
			t.Errorf("%s: strategy %v already belongs to another executor", name, s)
		}
		got = append(got, s)
	}
	if !slices.Equal(got, Strategies()) {
		t.Errorf("executors' strategies %v, want one per strategy %v", got, Strategies())
	}
	if Strategy(0).Valid() || !strings.HasPrefix(Strategy(0).String(), "strategy(") {
		t.Errorf("the zero Strategy must be invalid and say so, got %q", Strategy(0))
	}
}

// TestNew: known names build, a retired name is refused and says what it
// ran, an unknown name is refused.
func TestNew(t *testing.T) {
	be := cpu.New(1)
	layout, err := qpack.NewRecordLayout(qpack.SchemeInt4, 256, 256)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, wantErr string
		retiredAs     string
	}{
		{"scalar-v1", "", ""},
		{"grouped-v1", "", ""},
		{"fused-topk-v1", `executor "fused-topk-v1" is retired: it ran grouped-v1's steps`, "grouped-v1"},
		{"turbo-v9", `unknown executor "turbo-v9"`, ""},
		{"", `unknown executor ""`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.name, be, layout, 4)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatal(err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want it to contain %q", err, tc.wantErr)
			}
			ran, ok := Retired(tc.name)
			if ok != (tc.retiredAs != "") || ran != tc.retiredAs {
				t.Errorf("Retired(%q) = %q, %v; want %q", tc.name, ran, ok, tc.retiredAs)
			}
			if ok && !slices.Contains(Names(), ran) {
				t.Errorf("retired %q ran %q, which is not in Names %v", tc.name, ran, Names())
			}
		})
	}
}
