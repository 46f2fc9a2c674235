package verifier

import (
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/horizon-runmap/horizon/eviction"
)

// The replay family of consistent forgeries: edits of the routing traces
// or of the counters that every other check accepts once forge has
// re-derived the rest; check replay must name them. They need raw
// records with routing traces (version 2): an edition without any (the
// fixture, the GPU editions made before traces) skips them.
func init() {
	forgeries = append(forgeries,
		forgery{family: "replay", name: "one routed id changed in one request's trace", want: IDReplayMismatch, apply: forgeRoutedID},
		forgery{family: "replay", name: "one request's misses moved to hits in every block of a configuration", want: IDReplayMismatch, apply: forgeMissesAllBlocks},
		forgery{family: "replay", name: "a request's routing trace dropped", want: IDReplayMissing, apply: forgeDropTrace},
		forgery{family: "replay", name: "one expert of a batched prefill's wave changed", want: IDReplayMismatch, apply: forgeBatchID},
		forgery{family: "replay", name: "one more lookup in a batched prefill's wave", want: IDReplayTrace, apply: forgeBatchUses},
	)
}

// tracedPartial returns the raw paths and trees of the first partial
// residency configuration whose records carry routing traces; it skips
// the test when there is none.
func tracedPartial(t *testing.T, dir string) ([]string, []map[string]any) {
	t.Helper()
	for _, id := range configIDs(t, dir) {
		paths, docs := rawTrees(t, dir, id)
		if len(docs) == 0 || !isPartial(t, docs[0]) {
			continue
		}
		if _, ok := obj(t, arr(t, docs[0], "requests")[0])["routing_trace"]; ok {
			return paths, docs
		}
	}
	t.Skip("no partial-residency configuration with routing traces")
	return nil, nil
}

// treeTraces decodes a raw tree's warmup and request traces, in order.
func treeTraces(t *testing.T, d map[string]any) [][]eviction.Event {
	t.Helper()
	var out [][]eviction.Event
	dec := func(v any) {
		evs, err := eviction.Decode(obj(t, v, "routing_trace")["data"].(string))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, evs)
	}
	dec(obj(t, d, "warmup"))
	for _, q := range arr(t, d, "requests") {
		dec(q)
	}
	return out
}

// modelCountersOf replays the traces of a raw tree and returns each
// request's counters.
func modelCountersOf(t *testing.T, d map[string]any, traces [][]eviction.Event) []eviction.Counters {
	t.Helper()
	m, err := eviction.NewModel(eviction.Config{
		Layers: int(numInt(t, at(t, d, "setup", "model", "layers"))), Experts: int(numInt(t, at(t, d, "setup", "model", "experts_per_layer"))),
		Capacity: int(numInt(t, at(t, d, "setup", "capacity"))), Policy: at(t, d, "setup", "policy").(string),
		Placement: at(t, d, "setup", "placement").(string), RecordBytes: numInt(t, at(t, d, "artifact", "record_bytes")),
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []eviction.Counters
	for i, evs := range traces {
		start := m.Counters()
		for _, ev := range evs {
			if err := m.Apply(ev); err != nil {
				t.Fatal(err)
			}
		}
		if i > 0 {
			out = append(out, m.Counters().Sub(start))
		}
	}
	return out
}

// forgeRoutedID changes one expert id of one routed group in one request's
// trace of one worker (to an expert not in the group), choosing the first
// change that alters the replayed counters, and re-encodes the trace: the
// record's counters are the real ones, the trace no longer produces them.
func forgeRoutedID(t *testing.T, dir string) {
	paths, docs := tracedPartial(t, dir)
	d := docs[0]
	traces := treeTraces(t, d)
	want := modelCountersOf(t, d, traces)
	experts := int(numInt(t, at(t, d, "setup", "model", "experts_per_layer")))
	for ri := 1; ri < len(traces); ri++ {
		for _, ev := range traces[ri] {
			if ev.Kind != eviction.KindLease {
				continue
			}
			for e := 0; e < experts; e++ {
				if slices.Contains(ev.IDs, e) {
					continue
				}
				old := ev.IDs[0]
				ev.IDs[0] = e
				if !reflect.DeepEqual(modelCountersOf(t, d, traces), want) {
					data, err := eviction.Encode(traces[ri])
					if err != nil {
						t.Fatal(err)
					}
					obj(t, arr(t, d, "requests")[ri-1], "routing_trace")["data"] = data
					writeRaw(t, dir, paths[0], d)
					forge(t, dir)
					return
				}
				ev.IDs[0] = old
				break
			}
		}
	}
	t.Skip("no single routed id change alters the counters")
}

// batchEvent finds the first batched prefill wave (eviction.KindBatch) in
// a request's trace of the first traced partial-residency worker; it skips
// the test when the edition ran its prompts token at a time.
func batchEvent(t *testing.T, dir string) (paths []string, d map[string]any, traces [][]eviction.Event, ri, ei int) {
	paths, docs := tracedPartial(t, dir)
	d = docs[0]
	traces = treeTraces(t, d)
	for ri = 1; ri < len(traces); ri++ {
		for ei = range traces[ri] {
			if traces[ri][ei].Kind == eviction.KindBatch {
				return paths, d, traces, ri, ei
			}
		}
	}
	t.Skip("no batched prefill wave in the traces")
	return
}

// writeTrace re-encodes request ri's trace into the tree and forges.
func writeTrace(t *testing.T, dir, path string, d map[string]any, traces [][]eviction.Event, ri int) {
	data, err := eviction.Encode(traces[ri])
	if err != nil {
		t.Fatal(err)
	}
	obj(t, arr(t, d, "requests")[ri-1], "routing_trace")["data"] = data
	writeRaw(t, dir, path, d)
	forge(t, dir)
}

// forgeBatchID replaces one expert of a wave by one it does not hold, the
// first replacement that alters the replayed counters (misses, evictions):
// the record keeps the real counters, the trace no longer produces them.
func forgeBatchID(t *testing.T, dir string) {
	paths, d, traces, ri, _ := batchEvent(t, dir)
	want := modelCountersOf(t, d, traces)
	experts := int(numInt(t, at(t, d, "setup", "model", "experts_per_layer")))
	for ; ri < len(traces); ri++ {
		for _, ev := range traces[ri] {
			if ev.Kind != eviction.KindBatch {
				continue
			}
			for e := 0; e < experts; e++ {
				if slices.Contains(ev.IDs, e) {
					continue
				}
				old := ev.IDs[0]
				ev.IDs[0] = e
				if !reflect.DeepEqual(modelCountersOf(t, d, traces), want) {
					writeTrace(t, dir, paths[0], d, traces, ri)
					return
				}
				ev.IDs[0] = old
			}
		}
	}
	t.Skip("no single change of a wave's expert alters the counters")
}

// forgeBatchUses gives one expert of a wave one more lookup: the layer
// then routes more lookups than top_k x the positions fed.
func forgeBatchUses(t *testing.T, dir string) {
	paths, d, traces, ri, ei := batchEvent(t, dir)
	traces[ri][ei].Uses[0]++
	writeTrace(t, dir, paths[0], d, traces, ri)
}

// forgeMissesAllBlocks moves one miss of the first request to a hit in
// every block of the configuration (misses, layer misses, evictions,
// copies and bytes down by one, hits up by one), so that blocks still
// agree (physics.cache-identity) and every aggregate is re-derived; only
// the replay of the unchanged traces disagrees.
func forgeMissesAllBlocks(t *testing.T, dir string) {
	paths, docs := tracedPartial(t, dir)
	rb := numInt(t, at(t, docs[0], "artifact", "record_bytes"))
	for bi, d := range docs {
		c := obj(t, arr(t, d, "requests")[0], "cache")
		lm := arr(t, c, "layer_misses")
		l := slices.IndexFunc(lm, func(x any) bool { return numInt(t, x) > 0 })
		if l < 0 {
			t.Skip("the first request has no miss")
		}
		set := func(m map[string]any, k string, x int64) { m[k] = json.Number(strconv.FormatInt(x, 10)) }
		lm[l] = json.Number(strconv.FormatInt(numInt(t, lm[l])-1, 10))
		set(c, "misses", numInt(t, c["misses"])-1)
		set(c, "hits", numInt(t, c["hits"])+1)
		set(c, "evictions", numInt(t, c["evictions"])-1)
		set(c, "h2d_copies", numInt(t, c["h2d_copies"])-1)
		set(c, "h2d_bytes", numInt(t, c["h2d_bytes"])-rb)
		writeRaw(t, dir, paths[bi], d)
	}
	forge(t, dir)
}

// forgeDropTrace removes the routing trace of the last request of a
// traced record (version 2 requires it).
func forgeDropTrace(t *testing.T, dir string) {
	paths, docs := tracedPartial(t, dir)
	qs := arr(t, docs[0], "requests")
	delete(obj(t, qs[len(qs)-1]), "routing_trace")
	writeRaw(t, dir, paths[0], docs[0])
	forge(t, dir)
}
