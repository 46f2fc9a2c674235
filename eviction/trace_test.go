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
		{"one lease", []Event{{KindLease, 0, []int{3, 1, 2}, nil}}},
		{"lease and prefetch", []Event{{KindLease, 15, []int{63, 0, 7, 8, 9, 10, 11, 12}, nil}, {KindPrefetch, 1, []int{5}, nil}}},
		{"limits", []Event{{KindLease, MaxLayers - 1, []int{MaxExperts - 1}, nil}}},
		{"batch", []Event{{KindBatch, 2, []int{9, 4, 60}, []int{1, 300, MaxUses}}, {KindLease, 2, []int{4, 9}, nil}}},
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
		{"kind", Event{Kind(7), 0, []int{1}, nil}},
		{"layer", Event{KindLease, MaxLayers, []int{1}, nil}},
		{"expert", Event{KindLease, 0, []int{MaxExperts}, nil}},
		{"empty group", Event{KindLease, 0, nil, nil}},
		{"batch without uses", Event{KindBatch, 0, []int{1, 2}, nil}},
		{"batch uses short", Event{KindBatch, 0, []int{1, 2}, []int{3}}},
		{"batch zero uses", Event{KindBatch, 0, []int{1}, []int{0}}},
		{"batch too many uses", Event{KindBatch, 0, []int{1}, []int{MaxUses + 1}}},
		{"lease with uses", Event{KindLease, 0, []int{1}, []int{1}}},
	}
	for _, tc := range encode {
		if _, err := Encode([]Event{tc.ev}); err == nil {
			t.Errorf("Encode %s: no error", tc.name)
		}
	}
	for _, s := range []string{"!!", "AQ==", "AQAD", "BwABAQ==",
		"AwABAQE=",   // a batch of one id, its uses cut short
		"AwABAQAA"} { // a batch whose expert has 0 uses
		if _, err := Decode(s); !errors.Is(err, ErrTrace) {
			t.Errorf("Decode(%q): %v, want ErrTrace", s, err)
		}
	}
	// Version 1 traces have no batch events; their leases decode as before.
	batch, err := Encode([]Event{{KindBatch, 0, []int{1}, []int{2}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeFormat(TraceFormatV1, batch); !errors.Is(err, ErrTrace) {
		t.Errorf("a batch event in a %s trace: %v, want ErrTrace", TraceFormatV1, err)
	}
	lease, err := Encode([]Event{{KindLease, 3, []int{5, 6}, nil}})
	if err != nil {
		t.Fatal(err)
	}
	if evs, err := DecodeFormat(TraceFormatV1, lease); err != nil || len(evs) != 1 || evs[0].Layer != 3 {
		t.Errorf("a %s lease trace: %v, %v", TraceFormatV1, evs, err)
	}
	if _, err := DecodeFormat("eviction-trace-v0", lease); !errors.Is(err, ErrTrace) {
		t.Errorf("an unknown format: %v, want ErrTrace", err)
	}
}
