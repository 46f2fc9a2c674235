package verifier

import (
	"fmt"
	"slices"

	"github.com/horizon-runmap/horizon/editions"
)

// Tokens. The checkpoint pins its tokenizer and its EOS ids: every worker
// with the same checkpoint sha256 loads the same tokenizer.json (its
// SHA-256 is setup.tokenizer_sha256) and masks the same EOS ids. A
// synthetic checkpoint's EOS ids are its preset's (syntheticEOS, written
// here again from runtime/model's presets: the verifier does not import
// the runtime; a test holds the two together). Prompt token ids follow from
// the tokenizer and the contract's prompt text: identical in every worker
// that shares the tokenizer (or, in records without the field, the
// checkpoint), and for a synthetic checkpoint, whose tokenizer is byte
// level, they are the UTF-8 bytes of the text
// (contract.json /contract/prompts/<i>/text). The warmup's prompt token ids
// are not recorded, so the warmup is not checked here.
//
// What this cannot catch: for a Hugging Face checkpoint the verifier does
// not run the tokenizer, so prompt ids or EOS ids changed alike in every
// worker of that checkpoint pass (a reproduction catches them); the
// tokenizer's hash is compared between workers, never with a file. Preset
// shapes (layers, experts, ...) are not pinned here, only the EOS ids and
// the context (max_positions, which decides a depth contract's where-held
// prompts; pinned per checkpoint, and to the preset for synthetic ones).

var (
	IDPhysEOSPinned = def("physics", "physics.eos-pinned", Error,
		"workers with the same checkpoint sha256 record different eos_token_ids (reported against the majority)")
	IDPhysEOSPreset = def("physics", "physics.eos-preset", Error,
		"a synthetic checkpoint's eos_token_ids differ from its preset's")
	IDPhysContextPreset = def("physics", "physics.context-preset", Error,
		"a synthetic checkpoint's setup.model.max_positions differs from its preset's context (it decides which where-held prompts run)")
	IDPhysContextPinned = def("physics", "physics.context-pinned", Error,
		"workers with the same checkpoint sha256 record different setup.model.max_positions (reported against the majority)")
	IDPhysPresetUnknown = def("physics", "physics.preset-unknown", Hint,
		"a synthetic checkpoint names a preset this verifier does not know: its EOS ids were not checked against the preset")
	IDPhysTokenizerPinned = def("physics", "physics.tokenizer-pinned", Error,
		"workers with the same checkpoint sha256 record different setup.tokenizer_sha256 (reported against the majority)")
	IDPhysTokenizerUnknown = def("physics", "physics.tokenizer-unknown", Hint,
		"raw records without setup.tokenizer_sha256 (older builds): the tokenizer identity is unverified there, prompt ids were grouped by checkpoint instead")
	IDPhysPromptTokens = def("physics", "physics.prompt-tokens", Error,
		"a prompt's token ids differ from the majority of the workers sharing its tokenizer (or checkpoint, without the field), reported once per worker")
	IDPhysPromptBytes = def("physics", "physics.prompt-bytes", Error,
		"a synthetic (byte-level) checkpoint's prompt token ids are not the UTF-8 bytes of the contract's prompt text, reported once per worker")
)

// syntheticContext are the contexts (max_position_embeddings) of
// runtime/model's synthetic presets: a record's setup.model.max_positions
// decides which where-held prompts of a depth contract its worker ran.
var syntheticContext = map[string]int{
	"olmoe-1b-7b":     4096,
	"qwen15-moe-a27b": 8192,
	"olmoe-tiny":      4096,
	"qwen2moe-tiny":   8192,
}

// syntheticEOS are the EOS ids of runtime/model's synthetic presets.
var syntheticEOS = map[string][]int{
	"olmoe-1b-7b":     {50279},
	"qwen15-moe-a27b": {151643},
	"olmoe-tiny":      {511},
	"qwen2moe-tiny":   {511},
}

func checkTokens(v *view, ws []physWorker, fs *findings) {
	// EOS ids and tokenizer, pinned by the checkpoint.
	var order []string
	byCkpt := map[string][]*worker{}
	var noTok []string
	unknownPreset := map[string]string{}
	for _, pw := range ws {
		r := pw.w.rec
		k := r.Checkpoint.SHA256
		if byCkpt[k] == nil {
			order = append(order, k)
		}
		byCkpt[k] = append(byCkpt[k], pw.w)
		if r.Setup.TokenizerSHA256 == "" {
			noTok = append(noTok, pw.w.path)
		}
		// An empty EOS list is an unrecorded one (contract.eos-unknown).
		if r.Checkpoint.Kind == "synthetic" && len(r.Setup.Model.EOSTokenIDs) > 0 {
			want, known := syntheticEOS[r.Checkpoint.Arch]
			switch {
			case !known:
				if _, seen := unknownPreset[r.Checkpoint.Arch]; !seen {
					unknownPreset[r.Checkpoint.Arch] = pw.w.path
					fs.add(IDPhysPresetUnknown, pw.w.path, "/checkpoint/arch", "a known synthetic preset", r.Checkpoint.Arch,
						"synthetic preset %q is unknown to this verifier: its EOS ids are unverified", r.Checkpoint.Arch)
				}
			case !slices.Equal(r.Setup.Model.EOSTokenIDs, want):
				fs.add(IDPhysEOSPreset, pw.w.path, "/setup/model/eos_token_ids", want, r.Setup.Model.EOSTokenIDs,
					"synthetic preset %s masks EOS ids %v", r.Checkpoint.Arch, want)
			}
		}
		// max_positions is 0 in records made before the field.
		if n := r.Setup.Model.MaxPositions; r.Checkpoint.Kind == "synthetic" && n > 0 {
			if want, known := syntheticContext[r.Checkpoint.Arch]; known && n != want {
				fs.add(IDPhysContextPreset, pw.w.path, "/setup/model/max_positions", want, n,
					"synthetic preset %s has a context of %d positions", r.Checkpoint.Arch, want)
			}
		}
	}
	for _, k := range order {
		g := byCkpt[k]
		pinned(g, func(w *worker) string { return fmt.Sprint(w.rec.Setup.Model.EOSTokenIDs) }, func(w, ref *worker) {
			fs.add(IDPhysEOSPinned, w.path, "/setup/model/eos_token_ids", ref.rec.Setup.Model.EOSTokenIDs, w.rec.Setup.Model.EOSTokenIDs,
				"checkpoint %s masks EOS ids %v in the majority of its workers (e.g. %s)", short(k), ref.rec.Setup.Model.EOSTokenIDs, ref.path)
		})
		pinned(g, func(w *worker) string { return fmt.Sprint(w.rec.Setup.Model.MaxPositions) }, func(w, ref *worker) {
			fs.add(IDPhysContextPinned, w.path, "/setup/model/max_positions", ref.rec.Setup.Model.MaxPositions, w.rec.Setup.Model.MaxPositions,
				"checkpoint %s has a context of %d positions in the majority of its workers (e.g. %s)", short(k), ref.rec.Setup.Model.MaxPositions, ref.path)
		})
		var recorded []*worker
		for _, w := range g {
			if w.rec.Setup.TokenizerSHA256 != "" {
				recorded = append(recorded, w)
			}
		}
		pinned(recorded, func(w *worker) string { return w.rec.Setup.TokenizerSHA256 }, func(w, ref *worker) {
			fs.add(IDPhysTokenizerPinned, w.path, "/setup/tokenizer_sha256", ref.rec.Setup.TokenizerSHA256, w.rec.Setup.TokenizerSHA256,
				"checkpoint %s loads tokenizer %s in the majority of its workers (e.g. %s)", short(k), short(ref.rec.Setup.TokenizerSHA256), ref.path)
		})
	}
	if len(noTok) > 0 {
		fs.add(IDPhysTokenizerUnknown, noTok[0], "/setup/tokenizer_sha256", "the SHA-256 of the worker's tokenizer.json", nil,
			"%d of %d raw records (first: %s) do not record setup.tokenizer_sha256 (an older build): the tokenizer is unverified there",
			len(noTok), len(ws), noTok[0])
	}

	checkPromptIdentity(ws, fs)
	checkPromptBytes(v, ws, fs)
}

// pinned calls report(w, ref) for each worker whose key differs from the
// group's majority ref.
func pinned(g []*worker, key func(*worker) string, report func(w, ref *worker)) {
	keys := make([]string, len(g))
	for i, w := range g {
		keys[i] = key(w)
	}
	ref := majorityIndex(keys)
	for i, w := range g {
		if keys[i] != keys[ref] {
			report(w, g[ref])
		}
	}
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// checkPromptIdentity: the same prompt, the same tokenizer, the same ids.
func checkPromptIdentity(ws []physWorker, fs *findings) {
	tokenizerOf := func(w *worker) string {
		if s := w.rec.Setup.TokenizerSHA256; s != "" {
			return "tokenizer " + s
		}
		return "checkpoint " + w.rec.Checkpoint.SHA256
	}
	type slot struct {
		w *worker
		i int
	}
	var order []string
	groups := map[string]map[string][]slot{} // tokenizer -> prompt id -> requests
	for _, pw := range ws {
		k := tokenizerOf(pw.w)
		if groups[k] == nil {
			groups[k] = map[string][]slot{}
			order = append(order, k)
		}
		for i, q := range pw.w.rec.Requests {
			groups[k][q.PromptID] = append(groups[k][q.PromptID], slot{pw.w, i})
		}
	}
	for _, k := range order {
		reported := map[*worker]bool{}
		// Prompts in the order their first worker lists them.
		var prompts []string
		seen := map[string]bool{}
		for _, pw := range ws {
			if tokenizerOf(pw.w) != k {
				continue
			}
			for _, q := range pw.w.rec.Requests {
				if !seen[q.PromptID] {
					seen[q.PromptID] = true
					prompts = append(prompts, q.PromptID)
				}
			}
		}
		for _, p := range prompts {
			all := groups[k][p]
			keys := make([]string, len(all))
			for j, s := range all {
				keys[j] = fmt.Sprint(s.w.rec.Requests[s.i].PromptTokenIDs)
			}
			ref := all[majorityIndex(keys)]
			refIDs := ref.w.rec.Requests[ref.i].PromptTokenIDs
			for j, s := range all {
				if keys[j] == fmt.Sprint(refIDs) || reported[s.w] {
					continue
				}
				reported[s.w] = true
				fs.add(IDPhysPromptTokens, s.w.path, ptr("requests", s.i, "prompt_token_ids"), refIDs, s.w.rec.Requests[s.i].PromptTokenIDs,
					"prompt %s is tokenised otherwise than in the majority of the workers sharing %s (e.g. %s)", p, short(k), ref.w.path)
			}
		}
	}
}

// checkPromptBytes: a synthetic checkpoint's byte-level tokenizer encodes a
// prompt as its UTF-8 bytes.
func checkPromptBytes(v *view, ws []physWorker, fs *findings) {
	texts := contractPromptTexts(v)
	if len(texts) == 0 {
		return // check contract reports a contract without prompts
	}
	for _, pw := range ws {
		w := pw.w
		if w.rec.Checkpoint.Kind != "synthetic" {
			continue
		}
		bad, first := 0, -1
		for i, q := range w.rec.Requests {
			text, ok := texts[q.PromptID]
			if !ok {
				continue // check contract reports a prompt not in the contract
			}
			if !slices.Equal(q.PromptTokenIDs, utf8Bytes(text)) {
				bad++
				if first < 0 {
					first = i
				}
			}
		}
		if bad > 0 {
			q := w.rec.Requests[first]
			fs.add(IDPhysPromptBytes, w.path, ptr("requests", first, "prompt_token_ids"), utf8Bytes(texts[q.PromptID]), q.PromptTokenIDs,
				"%d of %d prompts are not tokenised as the UTF-8 bytes of the contract's text (first: %s, %d ids for %d bytes); a synthetic checkpoint's tokenizer is byte level",
				bad, len(w.rec.Requests), q.PromptID, len(q.PromptTokenIDs), len(texts[q.PromptID]))
		}
	}
}

// repeatToBytes is repeat-truncate-v1 under the byte-level tokenizer (one
// id per byte): text, then sep + text as often as it takes to reach n
// bytes, cut at n.
func repeatToBytes(text, sep string, n int) string {
	if text == "" || n < 1 {
		return ""
	}
	s := text
	for len(s) < n {
		s += sep + text
	}
	return s[:n]
}

func utf8Bytes(s string) []int {
	out := make([]int, len(s))
	for i := 0; i < len(s); i++ {
		out[i] = int(s[i])
	}
	return out
}

// contractPromptTexts reads /contract/prompts/<i>/{id,text}: under a
// contract with declared lengths (repeat-truncate-v1) each text as the
// byte-level tokenizer sees it made to its length, the text repeated with
// the separator until it has /contract/prompts/<i>/tokens bytes, cut there.
func contractPromptTexts(v *view) map[string]string {
	d := v.e.docs[editions.ContractFile]
	if d == nil || d.tree == nil {
		return nil
	}
	x, err := resolve(d.tree, "/contract/prompts")
	if err != nil {
		return nil
	}
	list, _ := x.([]any)
	out := map[string]string{}
	for i := range list {
		id, _ := resolve(list[i], "/id")
		text, err := resolve(list[i], "/text")
		sid, ok1 := id.(string)
		stext, ok2 := text.(string)
		if err == nil && ok1 && ok2 {
			if t := v.terms; t.declaredLengths() && i < len(t.PromptTokens) {
				stext = repeatToBytes(stext, t.PromptSeparator, t.PromptTokens[i])
			}
			out[sid] = stext
		}
	}
	return out
}
