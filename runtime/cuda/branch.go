//go:build cuda

package cuda

import (
	"errors"
	"fmt"

	"gorgonia.org/cu"
)

// branch is a side stream that a captured graph forks into and joins back
// (the L2 prefetch branch, step_prefetch.go; the shared-expert branch,
// step_shared_fork.go). Inside a capture, fork makes the side stream follow
// what the main stream has issued so far, mark records the side stream's
// work so far, and wait makes the main stream follow what mark recorded;
// every fork must be marked and waited on before the capture ends.
type branch struct {
	stream     cu.Stream
	fork, join cu.Event
}

// newBranch makes the stream and the two events; what names the branch in
// errors.
func newBranch(what string) (branch, error) {
	var br branch
	var err error
	if br.stream, err = cu.MakeStream(cu.NonBlocking); err != nil {
		return branch{}, fmt.Errorf("%s stream: %w", what, err)
	}
	if br.fork, err = cu.MakeEvent(cu.DisableTiming); err != nil {
		return branch{}, errors.Join(fmt.Errorf("%s fork event: %w", what, err), br.stream.Destroy())
	}
	if br.join, err = cu.MakeEvent(cu.DisableTiming); err != nil {
		return branch{}, errors.Join(fmt.Errorf("%s join event: %w", what, err), br.stream.Destroy(), cu.DestroyEvent(&br.fork))
	}
	return br, nil
}

// forkFrom makes the side stream follow the work issued on main so far.
func (br *branch) forkFrom(main cu.Stream) error {
	if err := br.fork.Record(main); err != nil {
		return err
	}
	return br.stream.Wait(br.fork, 0)
}

// mark records the side stream's work so far (the join event).
func (br *branch) mark() error { return br.join.Record(br.stream) }

// waitOn makes main follow what the last mark recorded.
func (br *branch) waitOn(main cu.Stream) error { return main.Wait(br.join, 0) }

// destroy frees the stream and the events.
func (br *branch) destroy() error {
	return errors.Join(br.stream.Destroy(), cu.DestroyEvent(&br.fork), cu.DestroyEvent(&br.join))
}
