// Package fidelity measures how far a treatment arm of a model (W4A16:
// routed experts in INT4) departs from its reference arm (the same
// checkpoint with FP16 experts) on the same prompts, in two ways:
//
//   - Paired structure (paired.go): each prompt's response from each arm is
//     scored by the frozen IFEval checkers; a prompt is both-pass,
//     both-fail, a regression (reference passes, treatment fails) or an
//     improvement, and separately identical-text or not. The discordant
//     pairs get an exact McNemar test: a two-sided binomial p-value on
//     regressions against improvements under p = 1/2.
//   - Per-token divergence, teacher-forced (position.go): the reference
//     arm's tokens are fed to the treatment arm, so at every position both
//     arms predict from the same context. Each position keeps KL(ref ||
//     treatment) over the whole vocabulary, whether the two argmaxes
//     agree, the largest absolute logit difference, and the top-k ids of
//     the reference with both arms' logits and log-probabilities.
//
// Summaries (summary.go) are median, p90 and max per prompt and pooled,
// each with a seeded percentile-bootstrap 95% interval. Everything here is
// a pure function of its inputs: the edition writer and horizon-verify call
// the same functions on the same retained values.
//
// What a verifier can recompute and what it cannot: the aggregates (every
// summary, count and p-value) recompute exactly from the per-position
// values and the retained responses. The per-position KL and max |logit
// difference| need both full distributions, which an edition does not
// keep (V values per position per arm); against the stored top-k they are
// checked for consistency only (CheckPosition): KL is at least the KL of
// the two-cell partition {top-k, rest} (a lower bound by the data
// processing inequality), max |logit difference| is at least the largest
// difference among the stored ids, the top-1 flag equals the comparison of
// the stored argmaxes, and each arm's log-probabilities are its logits less
// one constant.
package fidelity
