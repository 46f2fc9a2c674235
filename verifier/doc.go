// Package verifier checks a Horizon edition (DESIGN sections 7 and 8)
// independently of the program that wrote it. It reads the edition's files,
// recomputes everything that can be recomputed from the raw worker records
// with its own implementation of the formulas, and reports findings. It
// imports package editions for the document types only; it never imports the
// campaign runner or aggregator, so a bug there cannot hide itself here.
//
// The model follows restic's check: a verification is a list of typed
// findings, each with a stable ID ("manifest.hash-mismatch",
// "recompute.pooled-decode", ...), a severity, the file and JSON pointer it
// concerns, and the expected and found values. Errors mean the edition is
// wrong; hints mean something could not be verified (an UNKNOWN counter, a
// schema that is not available, executors that declare their own numerics)
// and are never a pass in disguise. IDs() lists every ID with its meaning.
//
// The checks, in the order they run and report:
//
//  1. manifest: every listed file is present with its size and SHA-256, no
//     unlisted file exists, paths are clean and sorted.
//
//  2. schema: every JSON document is one object, names the schema its path
//     calls for, is version 1, decodes into its Go type and validates
//     against its JSON Schema (a SchemaSet).
//
//  3. contract: the frozen contract's and campaign's canonical hashes
//     (CanonicalHash, the form package contracts documents, implemented
//     here again); the campaign's configurations are the configs/ files and
//     ran what the campaign declares (capacity, executor, placement and
//     policy, worker by worker); every configuration and worker ran an
//     eviction policy the contract admits (its cache.policy, or one of the
//     cache.policies PERF-POLICY-v1 declares); each has the declared blocks, each
//     block the declared prompts in order; every measured request has
//     exactly N tokens, no EOS id and timestamps that are monotonic and
//     agree with TTFT, runtime and decode time; the warmup is marked
//     excluded and not measured; every observation is recorded as the
//     contract requires for the device (a number, UNKNOWN, UNSUPPORTED).
//
//  4. recompute: pooled decode, overall output rate, TTFT and response
//     means, the sums behind them, VRAM and RSS peaks, H2D bytes, hits,
//     misses and block spread are rederived from raw and compared exactly
//     (float64 sums in block, then prompt order). A configuration's
//     uncertainty, when present (editions before bootstrap-v1 have none),
//     is recomputed with the declared seed: the bootstrap-v1 intervals of
//     pooled decode and the TTFT mean, and p50/p90/p99 of per-request
//     decode rate and TTFT (recompute.bootstrap, recompute.quantiles).
//
//  5. claims: each claim's value is its source value rounded as declared,
//     numerator / denominator equals the source, statuses are valid.
//
//  6. invariants: the contract's required-zero observations (the cache
//     counters) are observed zeros: a non-zero is an error, and so is
//     UNKNOWN, UNSUPPORTED or absent (invariants.required-zero-unobserved;
//     "required_zero" asks for an observed zero, and the former hint
//     invariants.unknown is retired); a 0 written for UNKNOWN or
//     UNSUPPORTED is an error.
//
//  7. consistency: configurations with the same checkpoint, expert format,
//     KV cache element type, expert and dense activation dtypes, device and
//     numerics family produce identical greedy token streams and
//     prompt tokens; a run that departs from the majority is reported.
//     Executors outside Options.SharedNumerics (default scalar-v1,
//     grouped-v1, fused-topk-v1) declare numerics of their own and are
//     compared by token agreement only (a hint).
//
//  8. binding: claims are bound. Claim <config>.<metric> must cite
//     configs/<config>.json#/metrics/<metric> (never claims.json, never
//     another configuration's file), with the ratio its metric is defined
//     by (decode_tokens / decode_seconds, output_tokens / runtime_seconds,
//     none for the rest), the metric's unit and decimals, and the
//     statement the verifier regenerates from the configuration document
//     with its own generator (held to report.Claims (campaigns/report) by a test). Every
//     configuration claims pooled decode, overall output, TTFT mean and
//     H2D bytes, plus the RSS and VRAM peaks where it observed them.
//     Evidence and publication are no higher than the campaign's (E1 < E2
//     < E3 < E4, internal < public); reproduction is always not_attempted
//     (a reproduction is a separate record, never upgraded inside the
//     edition). Contracts are pinned: the contract's canonical hash must be
//     a released contract's (releasedContracts, held to contracts/*.yaml by
//     a test), or else the canonical hash of the YAML given by
//     Options.ContractFile (--contract; then a hint says it was accepted
//     that way). With Options.CampaignFile (--campaign) the frozen campaign
//     must hold every key the YAML declares with an equal value, and the
//     same configuration ids in the same order. Weak spots: the campaign
//     comparison is generic, so keys the frozen campaign adds beyond the
//     YAML are taken as the loader's defaults, unchecked; a metric is bound
//     to its configuration's document, which check 4 recomputes, but a
//     claim set the runner would not write (an extra metric) is an error
//     only because its id is unknown.
//
//  9. physics: the raw records describe a run that can have happened, so a
//     forger who re-derives every aggregate, claim and hash still has to
//     get the physics right. Cache: hits + misses = layers x top_k x
//     (prompt_tokens + N - 1), one copy of record_bytes per miss and
//     prefetched record, one eviction per load at partial residency, none
//     at full, placement = capacity x layers records, and identical cache
//     settings give identical per-request counters (against the majority).
//     Time: the wall clock bounds preparation + warmup + requests (work <=
//     wall + 0.05 s, wall - work <= max(1 s, 10%)), token timestamps
//     strictly increase, the VRAM timeline spans the worker, workers on
//     one host and set of GPUs never overlap, no two requests share their
//     timings. Environment: one build (the manifest's tool); hosts as the
//     campaign declares (uniform: one GPU model and driver, on the cpu one
//     CPU model; mixed: each configuration on one host); each worker
//     ran its campaign configuration (checkpoint, expert format,
//     transport, prefetch, overlap), its declared KV cache element type
//     (physics.kv-dtype), expert activation dtype, FP16 only with INT4
//     experts and a batched prefill (physics.expert-activation-dtype), and
//     dense activation dtype, FP16 only with a batched prefill
//     (physics.dense-activation-dtype).
//     Memory: on CUDA the VRAM peaks hold
//     the placed experts, on every device the RSS peak the host authority; a missing timeline among timelines is an error.
//     Tokens: EOS ids and tokenizer pinned by the checkpoint (and, for
//     synthetic presets, the preset's EOS ids), prompt ids identical per
//     tokenizer and, byte-level synthetic, the UTF-8 bytes of the
//     contract's text; records without setup.tokenizer_sha256 are a hint.
//     It cannot catch a uniformly faked run: timings, wall clocks and VRAM
//     timeline rescaled together, or every block of a configuration that
//     shares its cache settings with no other changed alike, or HF prompt
//     and EOS ids changed in every worker; only a reproduction or a
//     trusted signature speaks to that.
//
//  10. replay: raw records of version 2 carry the cache's routing trace
//     of the warmup and of every request (eviction-trace-v2: every routed
//     group leased, every batched prefill's wave and every predicted group
//     prefetched, in call order; v1 has no waves).
//     The verifier replays each worker's sequence (warmup, then its
//     requests in order) through eviction.Model from the setup's initial
//     placement with its policy and capacity, and every request's hits,
//     misses, evictions, h2d_copies, h2d_bytes, layer_misses and, with
//     prefetch on, prefetch counters must equal the record's exactly
//     (replay.mismatch names the counter, both values, and the first event,
//     position and layer, after which they diverge). A trace must agree
//     with the tokens: prompt_tokens + N - 1 groups of top_k distinct
//     experts per layer, one prediction per position for every layer but
//     the first with prefetch on, none with it off (replay.trace). A
//     version-2 record without a trace is an error; version-1 records
//     (before traces) are a hint (replay.unverified). This closes the gap
//     check physics leaves: counters changed alike in every block no
//     longer pass, unless the forger also rewrites the traces into a
//     routing that produces them, which a reproduction's tokens and
//     counters then contradict.
//
//  11. derived: the files people read say what the JSON says. report.md and
//     report.html are required, and so is every plot they show. Their
//     results and cache-invariants tables are parsed (the section headings
//     "Results" and "Cache contract invariants") and every cell compared
//     with configs/<id>.json formatted as its column says (the verifier's
//     own header -> JSON pointer, scale, decimals map, a copy of
//     campaigns/report/fields.go's); each configuration has exactly one row; the
//     contract line's id and hash and the claim count must match.
//     report.html's headline sentences are recomputed with
//     editions.Headlines (the runner's function) from the configuration
//     documents in campaign order and the HBM ceilings package ceilings
//     computes from the raw records, and compared whole (derived.headline;
//     where the ceilings cannot be computed, a cuda sentence's HBM clause
//     is taken out of the comparison and its share must be the pooled
//     decode rate over the ceiling it states). A cuda report's ceilings
//     section ("Speeds beside their ceilings": HBM, H2D, VRAM, depth and
//     prefill against their bounds) is recomputed from the raw records with
//     package ceilings' Section, the runner's own, and must match the text
//     exactly (derived.ceilings; a section that cannot be recomputed, for
//     an architecture that is not a synthetic preset, is a hint,
//     derived.ceilings-unverified); a cuda campaign's report without the
//     section is an error (derived.ceilings). The section's figures are
//     one GPU's (the H200's): a cuda configuration whose records name
//     another GPU, or several, has UNKNOWN shares there, and a hint names
//     it (derived.ceilings-unrated), so that renaming the GPU in every
//     record cannot hide a poor share silently. Package ceilings takes the
//     models' shapes from modelspec, a leaf, so the verifier still depends
//     on no runtime package. Weak spots: a column the verifier does not
//     know is a hint (unverified); the other prose (caveats, definitions)
//     is not checked; the ceilings are recomputed with the runner's code (a bug both share
//     agrees with itself); and a plot is checked only for presence and the
//     PNG signature, never against the data it draws.
//
//  12. signature: attestation.dsse.json, the one file the manifest does not
//     list, is a DSSE envelope over an in-toto Statement v1 whose subject is
//     manifest.json's SHA-256 (package attest). With Options.TrustedKey a
//     missing, malformed, wrong-key or other-manifest signature is an
//     error; without it an unsigned edition is a hint (signature.unsigned)
//     and a signed one too (signature.unverified: whose key, not checked).
//
//  13. reproduction: with Options.Reproduction, the directory horizon-bench
//     reproduce wrote: its record names this edition's manifest SHA-256,
//     its original records are byte copies of the edition's, its rerun
//     records are workers of this edition's campaign, and every comparison
//     it states (prompts, tokens, cache counters, pooled decode ratio
//     against the declared tolerance) is recomputed from the two record
//     sets. Each claim then gets one verdict: reproduced, not reproduced
//     (an error: tokens or counters differ), outside the speed tolerance
//     (a hint: speed is reported, not enforced) or not rerun.
//
// What only a reproduction or a trusted signature can catch, because the
// records of one edition stay self-consistent: a uniformly faster fake run
// (every token timestamp, wall clock and VRAM sample rescaled together);
// cache counters changed alike in every block of a configuration that
// shares its cache settings with no other configuration (replaying routing
// traces would catch it; the records do not keep the routing yet); a
// Hugging Face checkpoint's prompt and EOS ids changed in every worker
// (the verifier runs no tokenizer); and any edition written from scratch
// by someone willing to get all of the above right. Tests pin the first two
// (TestUniformlyFasterFakeNeedsASignatureOrAReproduction: the fake passes
// every check, and a trusted key rejects it; TestCacheIdentityNeedsASibling),
// so the admission stays true.
//
// Verify never panics on a corrupt edition. It returns an error (wrapping
// ErrUnreadable) only when the edition cannot be read at all: the directory
// cannot be listed or manifest.json is missing or does not decode. A check
// that crashes becomes an internal.panic finding and the others still run.
//
// Weak spots, admitted: the verifier trusts what the raw records can be
// held to (it recomputes aggregates and checks their physics, it does not
// rerun the model: that is reproduction's job); timings are checked for
// consistency and against the wall clock, not against what the hardware
// could do; and the contract and campaign are read through the members
// listed in contract_terms.go, so a format change there needs a change here.
package verifier
