package verifier

import (
	"strings"

	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
)

// fixRaw builds one worker's raw record with deterministic tokens, timings
// and counters.
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
		Contract:   editions.ContractRef{ID: k.ID, SHA256: contractHash},
		StartedAt:  "2026-01-01T00:00:00Z",
		FinishedAt: "2026-01-01T00:00:01Z",
		Environment: editions.Environment{Device: "cpu", Hostname: "fixture", OS: "linux/amd64 6.8", CPU: "UNKNOWN", CPUs: 2, Threads: 2,
			GPU: editions.Unsupported, Driver: editions.Unsupported, Build: fixBuild},
		Checkpoint: editions.Checkpoint{Kind: "synthetic", Arch: "olmoe-tiny", Seed: &seed,
			SHA256: strings.Repeat("ab", 32)},
		Artifact: editions.ArtifactRef{SHA256: strings.Repeat("cd", 32), ExpertFormat: "qpack-int4-b256-v1", RecordBytes: fixRecord,
			OriginalDType: "BF16", ScaleDType: "FP16", NonRoutedDType: "FP16", ActivationDType: "FP32", AccumulationDType: "FP32"},
		Setup: editions.Setup{Model: model, Capacity: capacity, Spares: 2, Staging: 2, Executor: executor,
			Placement: "canonical", Policy: "lru", Regime: regime},
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
			ns[j] = ns[j-1] + 9_000_000 + int64((j*7919+i*104729+block*1299709+ci*15485863)%3_000_000)
		}
		layerMisses := make([]int64, fixModel.Layers)
		var misses int64
		if capacity < fixModel.ExpertsPerLayer {
			for l := range layerMisses {
				layerMisses[l] = int64(3 + i + l + block)
				misses += layerMisses[l]
			}
		}
		lookups := int64(fixModel.Layers * fixModel.TopK * (fixN + 2))
		promptIDs := fixTokens(20+i, 5-3*i)
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
				// This build has no artifact-read counter: UNKNOWN, never 0.
				RequestArtifactReads: editions.UnknownObs[int64](),
				LayerMisses:          layerMisses,
			},
		})
	}
	return r
}

// fixTokens is a deterministic greedy stream for prompt i; it never holds
// the EOS id.
func fixTokens(i, n int) []int {
	out := make([]int, n)
	for j := range out {
		out[j] = (i*97 + j*31 + 5) % 500
	}
	return out
}
