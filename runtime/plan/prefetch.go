package plan

import (
	"fmt"
	"strings"
)

// Read is one dense weight an instruction reads: instruction Instr's
// weight number Weight (the executor's numbering, in the order the
// instruction reads them), Bytes long. Routed expert rows are not dense
// reads: their addresses are known only once the layer has routed.
type Read struct {
	Instr  int
	Weight int
	Bytes  int64
}

// Prefetch is the leading Bytes of one Read, which an executor brings
// into L2 while instruction At runs.
type Prefetch struct {
	At    int
	Read  Read
	Bytes int64
}

// PrefetchFork reports whether instructions of kind op start an L2
// prefetch: attention and route read next to nothing from HBM at batch 1
// (the KV cache of a short context, a router of E x D), and their latency
// chains leave the memory system idle for microseconds in every layer.
func PrefetchFork(op Op) bool { return op == OpAttention || op == OpRoute }

// L2Prefetches schedules the dense weights of instrs into L2 ahead of their
// readers. Each fork instruction F (PrefetchFork) prefetches, in the order
// they are read, the dense reads of the instructions after F up to and
// including the next fork (or the end of instrs): at most budget bytes, the
// last read cut to its leading bytes. Later weights would be read only
// after the next fork, which prefetches them itself; reads before the
// first fork are not prefetched. reads(i) lists instruction i's dense
// reads in order.
//
// For an OLMoE layer that is o_proj and the router while attention runs,
// and the next layer's q|k|v while the layer routes (the routed rows in
// between are not counted: an executor keeps the prefetched lines with a
// higher eviction priority). Prefetching changes where loads find their
// bytes, never a value.
func L2Prefetches(instrs []Instr, reads func(i int) []int64, budget int64) []Prefetch {
	var out []Prefetch
	for f := range instrs {
		if !PrefetchFork(instrs[f].Op) {
			continue
		}
		left := budget
		for i := f + 1; i < len(instrs) && left > 0; i++ {
			for w, n := range reads(i) {
				if left <= 0 {
					break
				}
				take := min(n, left)
				if take > 0 {
					out = append(out, Prefetch{At: f, Read: Read{Instr: i, Weight: w, Bytes: n}, Bytes: take})
					left -= take
				}
			}
			if PrefetchFork(instrs[i].Op) {
				break
			}
		}
	}
	return out
}

// PrefetchListing is a schedule as text, one prefetch a line, with each
// instruction named as in Plan.String:
//
//	2 L0 attention        <- 3 L0 attn-out w0  8388608 of 8388608 bytes
func PrefetchListing(instrs []Instr, ps []Prefetch) string {
	name := func(i int) string {
		in := instrs[i]
		layer := "  "
		if in.Layer >= 0 {
			layer = fmt.Sprintf("L%d", in.Layer)
		}
		return fmt.Sprintf("%d %s %s", i, layer, in.Op)
	}
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "%-22s <- %s w%d  %d of %d bytes\n", name(p.At), name(p.Read.Instr), p.Read.Weight, p.Bytes, p.Read.Bytes)
	}
	return b.String()
}
