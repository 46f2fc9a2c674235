package eviction

import (
	"errors"
	"reflect"
	"testing"
)

func TestTraceRoundTrip(t *testing.T) {
	tests := []struct {
		name   string
		events []Event
	}{
		{"empty", nil},
		{"one lease", []Event{{KindLease, 0, []int{3, 1, 2}}}},
		{"lease and prefetch", []Event{{KindLease, 15, []int{63, 0, 7, 8, 9, 10, 11, 12}}, {KindPrefetch, 1, []int{5}}}},
		{"limits", []Event{{KindLease, MaxLayers - 1, []int{MaxExperts - 1}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Encode(tc.events)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Decode(s)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.events) {
				t.Fatalf("round trip %v, want %v", got, tc.events)
			}
		})
	}
}

func TestTraceRejects(t *testing.T) {
	encode := []struct {
		name string
		ev   Event
	}{
		{"kind", Event{Kind(7), 0, []int{1}}},
		{"layer", Event{KindLease, MaxLayers, []int{1}}},
		{"expert", Event{KindLease, 0, []int{MaxExperts}}},
		{"empty group", Event{KindLease, 0, nil}},
	}
	for _, tc := range encode {
		if _, err := Encode([]Event{tc.ev}); err == nil {
			t.Errorf("Encode %s: no error", tc.name)
		}
	}
	for _, s := range []string{"!!", "AQ==", "AQAD", "BwABAQ=="} { // bad base64, short header, short ids, kind 7
		if _, err := Decode(s); !errors.Is(err, ErrTrace) {
			t.Errorf("Decode(%q): %v, want ErrTrace", s, err)
		}
	}
}
