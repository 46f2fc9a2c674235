package campaigns

import (
	"slices"
	"testing"
)

// adopt waits for a live task of an earlier array for the same record and
// work key, and submits everything else.
func TestAdopt(t *testing.T) {
	cfg := &Configuration{ID: "c"}
	w := func(block int, key string) worker {
		return worker{cfg: cfg, block: block, rel: "raw/c/block-" + string(rune('0'+block)) + ".json", key: key}
	}
	arrays := []arrayRecord{
		{Job: "10", Tasks: []taskRecord{{0, "raw/c/block-1.json", "k1"}, {1, "raw/c/block-2.json", "k2"}, {2, "raw/c/block-3.json", "k3"}}},
		{Job: "11", Tasks: []taskRecord{{0, "raw/c/block-2.json", "k2"}}},
	}
	pending, running := TaskState{State: "PENDING"}, TaskState{State: "RUNNING"}
	failed := TaskState{State: "FAILED", Over: true}
	cancelled := TaskState{State: "CANCELLED", Over: true}
	for _, tc := range []struct {
		name       string
		todo       []worker
		arrays     []arrayRecord
		states     map[TaskID]TaskState
		wait       []TaskID // in todo's order
		submitting []int    // blocks
	}{
		{name: "first submission", todo: []worker{w(1, "k1"), w(2, "k2")}, submitting: []int{1, 2}},
		{name: "pending and running are adopted", todo: []worker{w(1, "k1"), w(3, "k3")}, arrays: arrays,
			states: map[TaskID]TaskState{{"10", 0}: pending, {"10", 2}: running},
			wait:   []TaskID{{"10", 0}, {"10", 2}}},
		{name: "failed and cancelled are resubmitted", todo: []worker{w(1, "k1"), w(3, "k3")}, arrays: arrays,
			states:     map[TaskID]TaskState{{"10", 0}: failed, {"10", 2}: cancelled},
			submitting: []int{1, 3}},
		{name: "a task the scheduler forgot is over", todo: []worker{w(3, "k3")}, arrays: arrays,
			states: map[TaskID]TaskState{}, submitting: []int{3}},
		{name: "another build's live task is not adopted", todo: []worker{w(1, "k1-new")}, arrays: arrays,
			states: map[TaskID]TaskState{{"10", 0}: running}, submitting: []int{1}},
		{name: "the later array's live task wins", todo: []worker{w(2, "k2")}, arrays: arrays,
			states: map[TaskID]TaskState{{"10", 1}: cancelled, {"11", 0}: running},
			wait:   []TaskID{{"11", 0}}},
		{name: "mixed", todo: []worker{w(1, "k1"), w(2, "k2"), w(3, "k3")}, arrays: arrays,
			states:     map[TaskID]TaskState{{"10", 0}: cancelled, {"11", 0}: pending, {"10", 2}: failed},
			wait:       []TaskID{{"11", 0}},
			submitting: []int{1, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wait, submit := adopt(tc.todo, tc.arrays, tc.states)
			var gotWait []TaskID
			for _, x := range wait {
				gotWait = append(gotWait, x.id)
			}
			var gotSubmit []int
			for _, x := range submit {
				gotSubmit = append(gotSubmit, x.block)
			}
			if !slices.Equal(gotWait, tc.wait) || !slices.Equal(gotSubmit, tc.submitting) {
				t.Errorf("wait %v submit blocks %v; want %v and %v", gotWait, gotSubmit, tc.wait, tc.submitting)
			}
		})
	}
}
