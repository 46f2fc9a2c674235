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
//  2. schema: every JSON document is one object, names the schema its path
//     calls for, is version 1, decodes into its Go type and validates
//     against its JSON Schema (a SchemaSet).
//  3. contract: the frozen contract's and campaign's canonical hashes
//     (CanonicalHash, the form package contracts documents, implemented
//     here again); the campaign's configurations are the configs/ files and
//     ran what the campaign declares; each has the declared blocks, each
//     block the declared prompts in order; every measured request has
//     exactly N tokens, no EOS id and timestamps that are monotonic and
//     agree with TTFT, runtime and decode time; the warmup is marked
//     excluded and not measured; every observation is recorded as the
//     contract requires for the device (a number, UNKNOWN, UNSUPPORTED).
//  4. recompute: pooled decode, overall output rate, TTFT and response
//     means, the sums behind them, VRAM and RSS peaks, H2D bytes, hits,
//     misses and block spread are rederived from raw and compared exactly
//     (float64 sums in block, then prompt order).
//  5. claims: each claim's value is its source value rounded as declared,
//     numerator / denominator equals the source, statuses are valid.
//  6. invariants: the contract's required-zero observations (the cache
//     counters) are 0 where they were observed; UNKNOWN is a hint; a 0
//     written for UNKNOWN or UNSUPPORTED is an error.
//  7. consistency: configurations with the same checkpoint, expert format,
//     device and numerics family produce identical greedy token streams and
//     prompt tokens; a run that departs from the majority is reported.
//     Executors outside Options.SharedNumerics (default scalar-v1,
//     grouped-v1, fused-topk-v1) declare numerics of their own and are
//     compared by token agreement only (a hint).
//
// Verify never panics on a corrupt edition. It returns an error (wrapping
// ErrUnreadable) only when the edition cannot be read at all: the directory
// cannot be listed or manifest.json is missing or does not decode. A check
// that crashes becomes an internal.panic finding and the others still run.
//
// Weak spots, admitted: the verifier trusts the raw records themselves (it
// can recompute aggregates, not rerun the model), so a writer that forges
// consistent raw records passes; timings are checked for consistency, not
// plausibility; and the contract and campaign are read through the members
// listed in contract_terms.go, so a format change there needs a change here.
package verifier
