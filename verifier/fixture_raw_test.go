package verifier

import (
	"strings"
	"time"

	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
)

// fixRaw builds one worker's raw record with deterministic tokens, timings
// and counters that satisfy every physics invariant (check physics): the
// cache counters follow from the routing (hits + misses = layers x top_k x
// (prompt_tokens + N - 1)) and are the same in every block (identical
// settings, identical misses); the prompt token ids are the UTF-8 bytes of
// the contract's text (the fixture's checkpoint is a byte-level synthetic
// one); token timestamps are strictly increasing and differ between every
// two requests; the workers run one after another, each wall clock a few
// milliseconds longer than the work it reports. The requests take about
// 1.5 s each, so that a forger who halves one configuration's timestamps
// leaves more than the wall clock's 1 s slack unaccounted for.
func fixRaw(k *contracts.Contract, ci int, id string, capacity int, executor string, block int, contractHash string) *editions.RawRecord {
	seed := int64(924)
	regime := "partial"
	if capacity == fixModel.ExpertsPerLayer {
		regime = "full"
	}
	model := fixModel
	model.EOSTokenIDs = []int{fixEOS}
	r := &editions.RawRecord{
		Schema: editions.SchemaRaw, Version: editions.Version, Edition: fixEdition,
		ConfigID: id, Block: block,
		Contract: editions.ContractRef{ID: k.ID, SHA256: contractHash},
		Environment: editions.Environment{Device: "cpu", Hostname: "fixture", OS: "linux/amd64 6.8", CPU: "UNKNOWN", CPUs: 2, Threads: 2,
			GPU: editions.Unsupported, Driver: editions.Unsupported, Build: fixBuild},
		Checkpoint: editions.Checkpoint{Kind: "synthetic", Arch: "olmoe-tiny", Seed: &seed,
			SHA256: strings.Repeat("ab", 32)},
		Artifact: editions.ArtifactRef{SHA256: strings.Repeat("cd", 32), ExpertFormat: "qpack-int4-b256-v1", RecordBytes: fixRecord,
			OriginalDType: "BF16", ScaleDType: "FP16", NonRoutedDType: "FP16", ActivationDType: "FP32", AccumulationDType: "FP32"},
		Setup: editions.Setup{Model: model, Capacity: capacity, Spares: 2, Staging: 2, Executor: executor,
			Placement: "canonical", Policy: "lru", Regime: regime, TokenizerSHA256: fixTokenizerSHA},
		Preparation: editions.Preparation{Seconds: 0.25 + float64(block)/64, AuthorityBytes: int64(fixModel.Layers * fixModel.ExpertsPerLayer * fixRecord),
			H2DBytes: int64(fixModel.Layers * capacity * fixRecord), H2DCopies: int64(fixModel.Layers * capacity)},
		Warmup: editions.Warmup{Excluded: true, PromptID: k.Warmup.Prompt.ID, N: fixWarmupN, TokenIDs: fixTokens(7, fixWarmupN), Seconds: 0.0125},
		Observations: editions.WorkerObservations{
			VRAMPeakBytes:         editions.UnsupportedObs[int64](),
			VRAMProcessPeakBytes:  editions.UnsupportedObs[int64](),
			RSSPeakBytes:          editions.Observed(int64(50_000_000 + ci*1_000_000 + block*12_345)),
			H2DBandwidthBytesPerS: editions.UnsupportedObs[float64](),
		},
	}
	for i, p := range k.Prompts {
		ns := make([]int64, fixN)
		ns[0] = 40_000_000 + int64(ci+1)*1_234_567 + int64(block)*777_777 + int64(i)*333_331
		for j := 1; j < fixN; j++ {
			ns[j] = ns[j-1] + 200_000_000 + int64((j*7919+i*104729+block*1299709+ci*15485863)%30_000_000)
		}
		// The byte-level tokenizer: one id per UTF-8 byte of the text.
		promptIDs := make([]int, len(p.Text))
		for j := 0; j < len(p.Text); j++ {
			promptIDs[j] = int(p.Text[j])
		}
		// Misses depend on the prompt and the layer, never on the block.
		layerMisses := make([]int64, fixModel.Layers)
		var misses int64
		if capacity < fixModel.ExpertsPerLayer {
			for l := range layerMisses {
				layerMisses[l] = int64(3 + i + l)
				misses += layerMisses[l]
			}
		}
		lookups := int64(fixModel.Layers * fixModel.TopK * (len(promptIDs) + fixN - 1))
		r.Requests = append(r.Requests, editions.Request{
			Index: i, PromptID: p.ID, PromptTokens: len(promptIDs), PromptTokenIDs: promptIDs, N: fixN,
			TokenIDs: fixTokens(i, fixN), TokenNs: ns,
			TTFTSeconds:    float64(ns[0]) / 1e9,
			DecodeSeconds:  float64(ns[fixN-1]-ns[0]) / 1e9,
			RuntimeSeconds: float64(ns[fixN-1]) / 1e9,
			Cache: editions.RequestCache{
				Hits: lookups - misses, Misses: misses, Evictions: misses,
				H2DBytes: misses * fixRecord, H2DCopies: misses,
				D2HExpertBytes:   editions.Observed[int64](0),
				Writebacks:       editions.Observed[int64](0),
				AuthorityWrites:  editions.Observed[int64](0),
				RequestHashBytes: editions.Observed[int64](0),
				// Every required-zero counter is observed: an UNKNOWN is an
				// error (invariants.required-zero-unobserved).
				RequestArtifactReads: editions.Observed[int64](0),
				LayerMisses:          layerMisses,
			},
		})
	}
	// Workers run one at a time, 10 s apart; each wall clock is the work it
	// reports plus 3.5 ms (tokenising, observing, writing the record).
	work := r.Preparation.Seconds + r.Warmup.Seconds
	for _, q := range r.Requests {
		work += q.RuntimeSeconds
	}
	start := fixStart.Add(time.Duration(ci*fixBlocks+block-1) * 10 * time.Second)
	r.StartedAt = start.Format(time.RFC3339Nano)
	r.FinishedAt = start.Add(time.Duration((work + 0.0035) * 1e9)).Format(time.RFC3339Nano)
	return r
}

// fixStart is when the fixture's first worker started; fixTokenizerSHA is
// the SHA-256 its workers record for the checkpoint's tokenizer.json.
var (
	fixStart        = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fixTokenizerSHA = strings.Repeat("ef", 32)
)

// fixTokens is a deterministic greedy stream for prompt i; it never holds
// the EOS id.
func fixTokens(i, n int) []int {
	out := make([]int, n)
	for j := range out {
		out[j] = (i*97 + j*31 + 5) % 500
	}
	return out
}
