package ceilings

import (
	"fmt"

	"github.com/horizon-runmap/horizon/editions"
	"github.com/horizon-runmap/horizon/eviction"
)

// PrefillChunk is the positions one batched prefill pass of the runtime
// takes (runtime/engine.PrefillChunk; TestPrefillChunkIsTheEngines holds
// them equal). It is restated here because ceilings must not depend on the
// runtime: the verifier recomputes the ceilings sections with it.
const PrefillChunk = 512

// Prefill ceilings (issue 15). Under a contract that times the prompt alone
// (declared prompt lengths and one output token: PERF-PREFILL-v1), each
// configuration's isolated prefill rate per prompt length is set beside:
//
//   - the weights read once: the non-routed FP16 weights once per chunk of
//     PrefillChunk positions (the lm_head once: only the last
//     position's logits are made; the embedding one row a token), and the
//     expert records the request's kernels read (recordReads: from its
//     routing trace) at HBM bandwidth;
//   - the arithmetic, for batched prefill on cuda: the matrix products' FLOPs
//     a token (2 x the non-routed matrices but the embedding and lm_head,
//     + top-k experts' gate, up and down) times SplitFactor (the FP16 hi/lo
//     split of the FP32 activations doubles the mma work) at the tensor-core
//     rate, plus causal attention's 4 x heads x head dim x (T-1)/2 FLOPs a
//     token (QK and PV over the positions before it, on average) at the
//     CUDA-core rate, which is where the prefill attention runs;
//   - at partial residency, the full-residency configuration's prefill of
//     the same prompt plus the request's H2D bytes over the workers'
//     measured H2D bandwidth (the model issue 15 asks for).

// PrefillLen is one prompt's isolated prefill over a configuration's
// measured requests of that prompt.
type PrefillLen struct {
	Prompt   string
	Tokens   int // the prompt's tokens
	Requests int
	// Timed counts the requests whose prefill_seconds is an observation;
	// Seconds sums them. H2DBytes sums every request's cache counter.
	Timed    int
	Seconds  float64
	H2DBytes int64
	// Reads sums the expert records the requests' kernels read, from their
	// routing traces: every id of a lease (token at a time: each lookup
	// reads its record) and of a batch wave (its distinct experts, each
	// read once for all its lookups). Traced counts the requests that had
	// a trace; without one for every request Reads is UNKNOWN.
	Reads  int64
	Traced int
}

// TokS is the pooled prefill rate over the timed requests (0 when none).
func (p *PrefillLen) TokS() float64 { return pooledPrefill(p.Timed, p.Tokens, p.Seconds) }

// pooledPrefill is timed requests' prompt tokens (tokens each) over their
// summed prefill seconds: 0 when none was timed.
func pooledPrefill(timed, tokens int, seconds float64) float64 {
	if timed == 0 || seconds <= 0 {
		return 0
	}
	return float64(timed*tokens) / seconds
}

// declaresPrefill reports whether the edition at dir was made under a
// contract that declares its prompts' lengths and generates one token
// (contract.json: a prompt_rule and output_tokens 1, PERF-PREFILL-v1's
// shape), whose isolated prefill is reported per length.
func declaresPrefill(dir string) (bool, error) {
	rule, out, err := contractShape(dir)
	return rule && out == 1, err
}

// addPrefill adds request q to its prompt's PrefillLen.
func (c *Config) addPrefill(q editions.Request) {
	p := c.prefillOf(q.PromptID)
	if p == nil {
		p = &PrefillLen{Prompt: q.PromptID, Tokens: q.PromptTokens}
		c.Prefills = append(c.Prefills, p)
	}
	p.Requests++
	if q.PrefillSeconds != nil && q.PrefillSeconds.Ok() {
		p.Timed++
		p.Seconds += q.PrefillSeconds.Value
	}
	p.H2DBytes += q.Cache.H2DBytes
	if n, ok := recordReads(q.RoutingTrace); ok {
		p.Reads += n
		p.Traced++
	}
}

// recordReads is the expert records a request's kernels read, from its
// routing trace (ok false without a readable one): the ids of its lease
// and batch events. Prefetches read nothing on the device.
func recordReads(t *editions.RoutingTrace) (int64, bool) {
	if t == nil {
		return 0, false
	}
	evs, err := eviction.DecodeFormat(t.Format, t.Data)
	if err != nil {
		return 0, false
	}
	var n int64
	for _, ev := range evs {
		if ev.Kind == eviction.KindLease || ev.Kind == eviction.KindBatch {
			n += int64(len(ev.IDs))
		}
	}
	return n, true
}

// PrefillShape is what a prefill of a synthetic preset reads and computes,
// apart from the experts it asks for.
type PrefillShape struct {
	// ChunkBytes is the non-routed FP16 weights one chunk reads once, but
	// the lm_head and the embedding table; HeadBytes the lm_head (the tied
	// embedding table when tied), read once a prefill; RowBytes one
	// embedding row.
	ChunkBytes, HeadBytes, RowBytes int64
	// MatmulFLOPs is a token's matrix-product FLOPs (2 x multiply-adds): the
	// non-routed matrices but the embedding and lm_head, and the top-k
	// experts' three projections.
	MatmulFLOPs float64
	// AttnFLOPsPerPos is a token's attention FLOPs per earlier position:
	// 4 x heads x head dim x layers (QK and PV).
	AttnFLOPsPerPos float64
}

// PrefillShapeOf computes PrefillShape for a synthetic preset.
func PrefillShapeOf(arch string) (PrefillShape, error) {
	cfg, ts, err := nonRouted(arch)
	if err != nil {
		return PrefillShape{}, err
	}
	var s PrefillShape
	for _, t := range ts {
		n := t.elems
		switch t.Name {
		case "model.embed_tokens.weight":
			s.RowBytes = int64(2 * cfg.HiddenSize)
			if cfg.TieWordEmbeddings {
				s.HeadBytes = 2 * n
			}
			continue
		case "lm_head.weight":
			s.HeadBytes = 2 * n
			continue
		}
		s.ChunkBytes += 2 * n
		if len(t.Shape) == 2 {
			s.MatmulFLOPs += 2 * float64(n)
		}
	}
	s.MatmulFLOPs += float64(cfg.NumLayers*cfg.TopK) * 3 * 2 * float64(cfg.ExpertFFN) * float64(cfg.HiddenSize)
	s.AttnFLOPsPerPos = 4 * float64(cfg.NumHeads*cfg.HeadDim()*cfg.NumLayers)
	return s, nil
}

// WeightsBytes is what a prefill of tokens positions whose kernels read
// reads expert records of recordBytes reads at least: the chunk weights
// once a chunk, the lm_head once, a row a token, and the records.
func (s PrefillShape) WeightsBytes(tokens int, reads, recordBytes int64) int64 {
	chunks := int64((tokens + PrefillChunk - 1) / PrefillChunk)
	return chunks*s.ChunkBytes + s.HeadBytes + int64(tokens)*s.RowBytes + reads*recordBytes
}

// ArithSeconds is the arithmetic's time for one prefill of tokens positions:
// the matrix products (times split) at tensorFLOPS and the attention at
// cudaFLOPS.
func (s PrefillShape) ArithSeconds(tokens int, split, tensorFLOPS, cudaFLOPS float64) float64 {
	t := float64(tokens)
	attn := s.AttnFLOPsPerPos * t * (t - 1) / 2
	return t*s.MatmulFLOPs*split/tensorFLOPS + attn/cudaFLOPS
}

// splitPrefillOnly parts confs, in order, into those with a decode and
// those with prefill lengths and no decode (a PERF-PREFILL-v1 edition's).
func splitPrefillOnly(confs []*Config) (dec, pre []*Config) {
	for _, c := range confs {
		if len(c.Prefills) > 0 && c.DecodeTokens == 0 {
			pre = append(pre, c)
		} else {
			dec = append(dec, c)
		}
	}
	return dec, pre
}

// fullPrefillFor is the full-residency configuration whose prefill of the
// same prompts a partial configuration is measured against (fullFor's
// choice among those with prefill lengths).
func fullPrefillFor(p *Config, all []*Config) *Config {
	var with []*Config
	for _, c := range all {
		if len(c.Prefills) > 0 {
			with = append(with, c)
		}
	}
	return fullFor(p, with)
}

// prefillOf is c's PrefillLen of prompt, nil when it has none.
func (c *Config) prefillOf(prompt string) *PrefillLen {
	for _, p := range c.Prefills {
		if p.Prompt == prompt {
			return p
		}
	}
	return nil
}

// writePrefill is the section of isolated prefill per prompt length against
// its ceilings, for the configurations with prefill lengths.
func writePrefill(p func(string, ...any), confs []*Config, o Options) error {
	var rows []*Config
	for _, c := range confs {
		if len(c.Prefills) > 0 {
			rows = append(rows, c)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	p("\n## Prefill against its ceilings\n\n")
	p("Isolated prefill (prefill_seconds: admission to the prompt's last logits), pooled over the timed requests of each prompt length. ")
	p("*Weights*: the non-routed FP16 weights once per chunk of %d positions (the lm_head once, an embedding row a token) plus the expert records its kernels read (from the routing trace: every id of a lease, the distinct ids of a batch wave) at HBM bandwidth. ", PrefillChunk)
	p("*Arithmetic* (batched prefill on cuda): the matrix products' FLOPs a token x %.0f (the FP16 hi/lo split of the activations) at %.0f TFLOP/s (%s), plus causal attention's 4 x heads x head dim x layers x (T-1)/2 FLOPs a token at %.0f TFLOP/s (%s). ",
		o.SplitFactor, o.TensorFLOPS/1e12, o.TensorSource, o.CUDACoreFLOPS/1e12, o.CUDACoreSource)
	p("*Partial residency*: the full-residency configuration's prefill of the same prompt + the request's H2D bytes over the median worker-measured H2D bandwidth.\n\n")
	p("| edition | configuration | capacity | prefill | prompt | tokens | prefill (tok/s) | weights (MB) | weights ceiling (tok/s) | of it | GFLOP/token | arithmetic ceiling (tok/s) | of it | H2D (MB) | full + transfer model (tok/s) | of it |\n")
	p("| --- | --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, c := range rows {
		s, err := PrefillShapeOf(c.Arch)
		if err != nil {
			return err
		}
		ref := fullPrefillFor(c, confs)
		for _, x := range c.Prefills {
			tok, of := editions.Unknown, func(ceil float64) string { return "-" }
			r := x.TokS()
			if r > 0 {
				tok = fmt.Sprintf("%.0f", r)
				of = func(ceil float64) string { return fmt.Sprintf("%.1f%%", 100*r/ceil) }
			}
			per := float64(max(1, x.Requests))
			wMB, wCeil, wOf, aFLOP, aCeil, aOf := editions.Unknown, "-", "-", "-", "-", "-"
			h2d, model, mOf := "-", "-", "-"
			bytes := -1.0
			if x.Traced == x.Requests {
				bytes = float64(s.WeightsBytes(x.Tokens, 0, c.RecordBytes)) + float64(x.Reads)/per*float64(c.RecordBytes)
				wMB = fmt.Sprintf("%.0f", bytes/1e6)
			}
			if c.Device == "cuda" {
				wCeil, wOf = editions.Unknown, editions.Unknown
				if bytes > 0 && o.Rated(c) {
					wc := float64(x.Tokens) * o.HBMBytesPerS / bytes
					wCeil, wOf = fmt.Sprintf("%.0f", wc), of(wc)
				}
				if c.PrefillMode == "batched" {
					ac := float64(x.Tokens) / s.ArithSeconds(x.Tokens, o.SplitFactor, o.TensorFLOPS, o.CUDACoreFLOPS)
					aFLOP = fmt.Sprintf("%.2f", (s.MatmulFLOPs*o.SplitFactor+s.AttnFLOPsPerPos*float64(x.Tokens-1)/2)/1e9)
					aCeil, aOf = editions.Unknown, editions.Unknown
					if o.Rated(c) {
						aCeil, aOf = fmt.Sprintf("%.0f", ac), of(ac)
					}
				}
				if !c.Full() {
					h2d = fmt.Sprintf("%.1f", float64(x.H2DBytes)/per/1e6)
					bw := c.MedianH2D()
					var rp *PrefillLen
					if ref != nil {
						rp = ref.prefillOf(x.Prompt)
					}
					switch {
					case bw <= 0:
						model, mOf = editions.Unknown, "H2D bandwidth not observed"
					case rp == nil || rp.TokS() <= 0:
						model, mOf = editions.Unknown, "no full-residency prefill of this prompt"
					default:
						t := float64(x.Tokens)/rp.TokS() + float64(x.H2DBytes)/per/bw
						mc := float64(x.Tokens) / t
						model, mOf = fmt.Sprintf("%.0f", mc), of(mc)
					}
				}
			}
			p("| %s | %s | %d/%d | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", c.Edition, c.ID, c.Capacity, c.Experts,
				c.PrefillMode, x.Prompt, x.Tokens, tok, wMB, wCeil, wOf, aFLOP, aCeil, aOf, h2d, model, mOf)
		}
	}
	return nil
}
