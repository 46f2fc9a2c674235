package verifier

import (
	"testing"

	"github.com/horizon-runmap/horizon/editions"
)

func TestTimelineProblems(t *testing.T) {
	ob := editions.Observed[int64]
	unk := editions.UnknownObs[int64]()
	sample := func(at, dev int64, proc editions.Obs[int64]) editions.VRAMSample {
		return editions.VRAMSample{AtNs: at, DeviceUsedBytes: dev, ProcessUsedBytes: proc}
	}
	good := []editions.VRAMSample{sample(0, 10, ob(5)), sample(20, 30, ob(25)), sample(40, 20, unk)}
	tests := []struct {
		name     string
		o        editions.WorkerObservations
		problems int
	}{
		{"no timeline", editions.WorkerObservations{VRAMPeakBytes: editions.UnsupportedObs[int64]()}, 0},
		{"consistent", editions.WorkerObservations{VRAMPeakBytes: ob(30), VRAMProcessPeakBytes: ob(25), VRAMTimeline: good}, 0},
		{"device peak not the max", editions.WorkerObservations{VRAMPeakBytes: ob(31), VRAMProcessPeakBytes: ob(25), VRAMTimeline: good}, 1},
		{"process peak not the max", editions.WorkerObservations{VRAMPeakBytes: ob(30), VRAMProcessPeakBytes: ob(24), VRAMTimeline: good}, 1},
		{"process peak unknown but observed in the timeline", editions.WorkerObservations{VRAMPeakBytes: ob(30), VRAMProcessPeakBytes: unk, VRAMTimeline: good}, 1},
		{"process peak without a process reading", editions.WorkerObservations{VRAMPeakBytes: ob(10), VRAMProcessPeakBytes: ob(5),
			VRAMTimeline: []editions.VRAMSample{sample(0, 10, unk)}}, 1},
		{"time goes backwards", editions.WorkerObservations{VRAMPeakBytes: ob(30), VRAMProcessPeakBytes: ob(25),
			VRAMTimeline: []editions.VRAMSample{sample(20, 30, ob(25)), sample(10, 10, ob(5))}}, 1},
		{"timeline without an observed peak", editions.WorkerObservations{VRAMPeakBytes: editions.UnsupportedObs[int64](), VRAMTimeline: good}, 1},
	}
	for _, tc := range tests {
		if got := timelineProblems(tc.o); len(got) != tc.problems {
			t.Errorf("%s: %d problems %v, want %d", tc.name, len(got), got, tc.problems)
		}
	}
}
