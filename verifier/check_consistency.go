package verifier

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Check 7: greedy decoding is deterministic, and residency must never change
// tokens. Configurations that share the checkpoint (sha256), the expert
// format, the KV cache's element type (artifact.kv_dtype: an FP16 cache
// rounds K and V, so its tokens may differ from an FP32 one's), the routed
// experts' activation dtype (artifact.expert_activation_dtype: FP16
// activations round a batched prefill's expert inputs, so their logits
// differ from FP32's), the dense projections' activation dtype
// (artifact.dense_activation_dtype: FP16 activations round a batched
// prefill's attention and shared-expert projection inputs, likewise), the
// device and a numerics family produce identical token streams
// for every prompt, in every block, whatever their capacity, placement or
// policy. Our executors (Options.SharedNumerics) form one family; any other
// executor is a family of its own and is only compared by agreement rate (a
// hint). Different devices are likewise compared by agreement only: the CPU
// and CUDA backends do not promise bit-identical numerics.

// numericsKey is what must be equal for two streams to be required equal.
type numericsKey struct {
	checkpoint, format, kv, expertAct, denseAct, device, family string
}

// stream is one token stream and where it came from.
type stream struct {
	config  *configView
	w       *worker
	request int // -1 for the warmup
	tokens  []int
	prompt  []int // prompt_token_ids; nil for the warmup
}

func (s *stream) pointer(j int) string {
	if s.request < 0 {
		return ptr("warmup", "token_ids", j)
	}
	return ptr("requests", s.request, "token_ids", j)
}

func checkConsistency(v *view, fs *findings) {
	// groups[key][prompt] are all streams of that prompt, in deterministic
	// order (configurations by id, workers by block, requests in order).
	groups := map[numericsKey]map[string][]*stream{}
	var keys []numericsKey
	var prompts = map[numericsKey][]string{}
	for _, c := range v.configs {
		for _, w := range c.workers {
			k := keyOf(v, w)
			g := groups[k]
			if g == nil {
				g = map[string][]*stream{}
				groups[k] = g
				keys = append(keys, k)
			}
			var streams []*stream
			if wu := w.rec.Warmup; len(wu.TokenIDs) > 0 {
				streams = append(streams, &stream{config: c, w: w, request: -1, tokens: wu.TokenIDs})
			}
			for i, r := range w.rec.Requests {
				streams = append(streams, &stream{config: c, w: w, request: i, tokens: r.TokenIDs, prompt: r.PromptTokenIDs})
			}
			for _, s := range streams {
				name := promptName(s)
				if _, seen := g[name]; !seen {
					prompts[k] = append(prompts[k], name)
				}
				g[name] = append(g[name], s)
			}
		}
	}
	refs := map[numericsKey]map[string]*stream{}
	for _, k := range keys {
		refs[k] = map[string]*stream{}
		for _, name := range prompts[k] {
			all := groups[k][name]
			ref := majority(all, func(s *stream) []int { return s.tokens })
			refs[k][name] = ref
			pref := majority(all, func(s *stream) []int { return s.prompt })
			for _, s := range all {
				compareStreams(ref, pref, s, name, fs)
			}
		}
	}
	agreementHints(keys, refs, fs)
}

// majority returns the first stream whose sequence (by get) is the most
// common one: the reference a deviating run is reported against, so that
// one bad run is reported once, not against every good one.
func majority(all []*stream, get func(*stream) []int) *stream {
	best, bestN := all[0], 0
	for i, a := range all {
		n := 0
		for _, b := range all[i:] {
			if slices.Equal(get(a), get(b)) {
				n++
			}
		}
		if n > bestN {
			best, bestN = a, n
		}
	}
	return best
}

func keyOf(v *view, w *worker) numericsKey {
	r := w.rec
	family := "executor " + r.Setup.Executor
	if slices.Contains(v.opts.SharedNumerics, r.Setup.Executor) {
		family = "shared numerics (" + strings.Join(v.opts.SharedNumerics, ", ") + ")"
	}
	return numericsKey{checkpoint: r.Checkpoint.SHA256, format: r.Artifact.ExpertFormat, kv: r.Artifact.KVDTypeOf(),
		expertAct: r.Artifact.ExpertActivationDTypeOf(), denseAct: r.Artifact.DenseActivationDTypeOf(),
		device: r.Environment.Device, family: family}
}

func promptName(s *stream) string {
	if s.request < 0 {
		return "warmup:" + s.w.rec.Warmup.PromptID
	}
	return s.w.rec.Requests[s.request].PromptID
}

// compareStreams reports where s departs from the reference tokens (ref)
// and prompt tokens (pref). Streams of different lengths are compared over
// the shorter one: a wrong length is a contract finding, not a numerics one.
func compareStreams(ref, pref, s *stream, name string, fs *findings) {
	if s.request >= 0 && pref.request >= 0 && !slices.Equal(pref.prompt, s.prompt) {
		fs.add(IDConsPromptLen, s.w.path, ptr("requests", s.request, "prompt_token_ids"), pref.prompt, s.prompt,
			"prompt %s is tokenised differently than in %s (same checkpoint, so the same tokenizer)", name, pref.w.path)
	}
	n := min(len(ref.tokens), len(s.tokens))
	for j := 0; j < n; j++ {
		if ref.tokens[j] != s.tokens[j] {
			fs.add(IDConsTokenStream, s.w.path, s.pointer(j), ref.tokens[j], s.tokens[j],
				"prompt %s: token %d differs from the majority stream (e.g. %s, %s); same checkpoint, expert format, device and numerics, so %s",
				name, j, ref.w.path, describe(ref), differsBy(ref, s))
			return
		}
	}
}

func describe(s *stream) string {
	r := s.w.rec.Setup
	return fmt.Sprintf("capacity %d, executor %s, block %d", r.Capacity, r.Executor, s.w.block)
}

// differsBy names what legitimately differs between two runs that must
// agree, for the message.
func differsBy(a, b *stream) string {
	ra, rb := a.w.rec.Setup, b.w.rec.Setup
	var d []string
	if ra.Capacity != rb.Capacity {
		d = append(d, fmt.Sprintf("capacity %d vs %d", ra.Capacity, rb.Capacity))
	}
	if ra.Executor != rb.Executor {
		d = append(d, fmt.Sprintf("executor %s vs %s", ra.Executor, rb.Executor))
	}
	if ra.Placement != rb.Placement || ra.Policy != rb.Policy {
		d = append(d, "placement/policy")
	}
	if a.w.block != b.w.block || a.config != b.config {
		d = append(d, fmt.Sprintf("%s block %d vs %s block %d", a.config.id, a.w.block, b.config.id, b.w.block))
	}
	if len(d) == 0 {
		return "the streams must be identical"
	}
	return "the streams must be identical despite " + strings.Join(d, ", ")
}

// agreementHints compares families that share checkpoint and expert format
// but are not required to agree, and reports their token agreement.
func agreementHints(keys []numericsKey, refs map[numericsKey]map[string]*stream, fs *findings) {
	for i := 0; i < len(keys); i++ {
		for j := i + 1; j < len(keys); j++ {
			a, b := keys[i], keys[j]
			if a.checkpoint != b.checkpoint || a.format != b.format {
				continue
			}
			var prompts []string
			for p := range refs[a] {
				if _, ok := refs[b][p]; ok {
					prompts = append(prompts, p)
				}
			}
			sort.Strings(prompts)
			same, total, identical := 0, 0, 0
			for _, p := range prompts {
				x, y := refs[a][p].tokens, refs[b][p].tokens
				n := max(len(x), len(y))
				eq := 0
				for k := 0; k < min(len(x), len(y)); k++ {
					if x[k] == y[k] {
						eq++
					}
				}
				same += eq
				total += n
				if eq == n {
					identical++
				}
			}
			rate := 0.0
			if total > 0 {
				rate = float64(same) / float64(total)
			}
			file := ""
			if len(prompts) > 0 {
				file = refs[b][prompts[0]].w.path
			}
			fs.add(IDConsNumerics, file, "", numericsLabel(a), numericsLabel(b),
				"token agreement %.4f (%d/%d positions), %d/%d streams identical over %d prompts; these declare different numerics, so this is reported, not enforced",
				rate, same, total, identical, len(prompts), len(prompts))
		}
	}
}

// numericsLabel names a numerics key for the agreement hint: its family
// and device, then whatever dtype differs from the FP32 default.
func numericsLabel(k numericsKey) string {
	return k.family + " on " + k.device + kvLabel(k.kv) + expertActLabel(k.expertAct) + denseActLabel(k.denseAct)
}

// kvLabel names a KV cache element type other than FP32 (the default,
// which stays unnamed so that the hints of editions made before the field
// read as before).
func kvLabel(kv string) string {
	if kv == "" || kv == "FP32" {
		return ""
	}
	return ", " + kv + " KV cache"
}

// expertActLabel names an expert activation dtype other than FP32 (the
// default, unnamed so that the hints of editions without FP16 expert
// activations read as before).
func expertActLabel(act string) string {
	if act == "" || act == "FP32" {
		return ""
	}
	return ", " + act + " expert activations"
}

// denseActLabel names a dense activation dtype other than FP32 (the
// default, unnamed so that the hints of editions without FP16 dense
// activations read as before).
func denseActLabel(act string) string {
	if act == "" || act == "FP32" {
		return ""
	}
	return ", " + act + " dense activations"
}
