package verifier

import "github.com/horizon-runmap/horizon/editions"

// Check physics: the raw records describe something that can have happened.
// The shallow checks prove that aggregates, claims and hashes follow from
// the raw records; a careful forger rewrites all of those. What such a
// forger must also get right is the physics of the run, which ties the
// numbers of one record to each other, to the other records and to the
// frozen campaign and contract:
//
//   - cache physics (physics_cache.go): every routed lookup is a hit or a
//     miss, every copy moves one record, every load into a full cache
//     evicts, placement fills the published rows once, and identical cache
//     settings give identical counters in every worker;
//   - time is physical (physics_time.go): a worker's wall clock bounds the
//     work it reports, tokens come one after another, the VRAM timeline
//     spans the worker, workers run one at a time, and no two requests share
//     their timings;
//   - one run, one build (physics_env.go), matching the manifest; hosts as
//     the campaign declares them (uniform: one GPU model and driver, one CPU
//     model on the cpu; mixed: each configuration on one host); and every
//     worker ran what the campaign declares for its configuration;
//   - the KV cache is declared (physics_kv.go): each worker ran the KV
//     cache element type its configuration declares;
//   - so are the expert activations (physics_activations.go): each worker's
//     routed experts took the batched-prefill activation dtype its
//     configuration declares;
//   - and the dense projections' (physics_dense_activations.go): each
//     worker's attention and shared-expert projections took the
//     batched-prefill activation dtype its configuration declares;
//   - memory has a floor (physics_memory.go): on CUDA the VRAM peaks hold
//     the resident experts the worker placed and, for a synthetic preset,
//     its KV cache;
//   - tokens (physics_tokens.go): EOS ids and the tokenizer are pinned by
//     the checkpoint, and prompt token ids follow from the contract's text.
//
// What this cannot catch, admitted: a run faked uniformly (every timing,
// wall clock and VRAM timeline rescaled together, every counter of a
// configuration with no sibling changed together) is consistent physics.
// Only a reproduction (Options.Reproduction) or a trusted signature
// (Options.TrustedKey) speaks to that.
func checkPhysics(v *view, fs *findings) {
	ws := physWorkers(v)
	checkCachePhysics(ws, fs)
	checkCacheIdentity(v, ws, fs)
	checkTimePhysics(ws, fs)
	checkEnvironment(v, ws, fs)
	checkKVDType(v, fs)
	checkExpertActDType(v, fs)
	checkDenseActDType(v, fs)
	checkMemoryFloor(ws, fs)
	checkTokens(v, ws, fs)
}

// physWorker is one decoded raw record with its configuration.
type physWorker struct {
	c *configView
	w *worker
}

// physWorkers lists every decoded raw record, configurations by id, then
// blocks: the deterministic order every physics report follows.
func physWorkers(v *view) []physWorker {
	var out []physWorker
	for _, c := range v.configs {
		for _, w := range c.workers {
			out = append(out, physWorker{c: c, w: w})
		}
	}
	return out
}

// majorityIndex returns the index of the first key that is the most common
// one (-1 for none): the reference a deviating worker is reported against,
// so that one bad worker is reported once, not against every good one. On
// a tie the earliest key wins, so with two workers the later one is
// reported.
func majorityIndex(keys []string) int {
	count := map[string]int{}
	for _, k := range keys {
		count[k]++
	}
	best := -1
	for i, k := range keys {
		if best < 0 || count[k] > count[keys[best]] {
			best = i
		}
	}
	return best
}

// Defaults of the setup fields that records from before them omit (see
// editions.Setup).
const (
	defaultTransport = "staged"
	defaultPrefetch  = "off"
	defaultOverlap   = "off"
	defaultStepMode  = "ops"
)

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func prefetchOf(s editions.Setup) string { return orDefault(s.Prefetch, defaultPrefetch) }
