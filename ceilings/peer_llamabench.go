package ceilings

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/horizon-runmap/horizon/modelspec"
)

// LlamaBench is one result line of llama-bench's JSON Lines output (-o
// jsonl): one test (pp<n>, tg<n>, tg<n> @ d<depth>) of one model, as
// scripts/llamacpp/llamacpp-h200.sh runs it (docs/peers.md). Arch and Seed
// name the synthetic checkpoint the GGUF was made from, read from the
// model's file name (<arch>-<seed>[-<tag>].gguf).
type LlamaBench struct {
	File        string    `json:"-"` // the JSONL file and line it came from
	BuildCommit string    `json:"build_commit"`
	Backends    string    `json:"backends"`
	GPU         string    `json:"gpu_info"`
	ModelFile   string    `json:"model_filename"`
	ModelType   string    `json:"model_type"`
	NBatch      int       `json:"n_batch"`
	NUBatch     int       `json:"n_ubatch"`
	TypeK       string    `json:"type_k"`
	TypeV       string    `json:"type_v"`
	NGPULayers  int       `json:"n_gpu_layers"`
	FlashAttn   int       `json:"flash_attn"`
	NPrompt     int       `json:"n_prompt"`
	NGen        int       `json:"n_gen"`
	NDepth      int       `json:"n_depth"`
	AvgTS       float64   `json:"avg_ts"`
	StddevTS    float64   `json:"stddev_ts"`
	SamplesTS   []float64 `json:"samples_ts"`
	Arch        string    `json:"-"`
	Seed        int64     `json:"-"`
}

// Test is the test's name as llama-bench prints it: pp512, tg128,
// tg128 @ d2048.
func (l LlamaBench) Test() string {
	switch {
	case l.NGen == 0:
		return fmt.Sprintf("pp%d", l.NPrompt)
	case l.NPrompt == 0 && l.NDepth == 0:
		return fmt.Sprintf("tg%d", l.NGen)
	case l.NPrompt == 0:
		return fmt.Sprintf("tg%d @ d%d", l.NGen, l.NDepth)
	}
	return fmt.Sprintf("pp%d+tg%d @ d%d", l.NPrompt, l.NGen, l.NDepth)
}

// ggufName is the file name llamacpp-h200.sh gives a synthetic checkpoint's
// GGUF: <arch>-<seed>-q4e.gguf (any tag after the seed is accepted).
var ggufName = regexp.MustCompile(`^([a-z0-9][a-z0-9-]*?)-([0-9]+)(-[A-Za-z0-9_.]+)?\.gguf$`)

// LoadLlamaBench reads a llama-bench JSON Lines file. Every line must be a
// result with a model whose file name names a synthetic preset and its seed,
// a positive rate and at least one sample; blank lines are skipped.
func LoadLlamaBench(path string) ([]LlamaBench, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("ceilings: %w", err)
	}
	var out []LlamaBench
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		where := fmt.Sprintf("%s:%d", path, n)
		var l LlamaBench
		d := json.NewDecoder(bytes.NewReader(line))
		if err := d.Decode(&l); err != nil {
			return nil, fmt.Errorf("ceilings: %s: not a llama-bench JSON line: %w", where, err)
		}
		if _, err := d.Token(); !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("ceilings: %s: more than one JSON value on the line", where)
		}
		l.File = where
		m := ggufName.FindStringSubmatch(filepath.Base(l.ModelFile))
		if m == nil {
			return nil, fmt.Errorf("ceilings: %s: model %q: want <arch>-<seed>[-<tag>].gguf, as scripts/llamacpp/llamacpp-h200.sh names a synthetic checkpoint's GGUF", where, l.ModelFile)
		}
		if _, err := modelspec.LookupPreset(m[1]); err != nil {
			return nil, fmt.Errorf("ceilings: %s: model %q: %w", where, l.ModelFile, err)
		}
		l.Arch = m[1]
		if l.Seed, err = strconv.ParseInt(m[2], 10, 64); err != nil {
			return nil, fmt.Errorf("ceilings: %s: model %q: seed: %w", where, l.ModelFile, err)
		}
		if !(l.AvgTS > 0) || math.IsInf(l.AvgTS, 0) || len(l.SamplesTS) == 0 || l.NPrompt < 0 || l.NGen < 0 || l.NDepth < 0 || l.NPrompt+l.NGen == 0 {
			return nil, fmt.Errorf("ceilings: %s: not a finished test (avg_ts %v, %d samples, n_prompt %d, n_gen %d, n_depth %d)",
				where, l.AvgTS, len(l.SamplesTS), l.NPrompt, l.NGen, l.NDepth)
		}
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("ceilings: %s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("ceilings: %s: no llama-bench results", path)
	}
	return out, nil
}

// peerRow is one comparison of the peer section.
type peerRow struct {
	c          *Config
	what       string // our measurement
	ours       float64
	peer       LlamaBench
	gpuMatches bool
}

// peerRows pairs each full-residency cuda configuration's measurements with
// the peer's tests of the same checkpoint: an isolated prefill of a
// T-token prompt with pp<T>; under PERF-DEPTH-v1, each depth's isolated
// prefill (d > 1 tokens) with pp<d>, then the decode after it with tg<N>
// at depth d (d0 is a one-token prompt: tg<N> at depth 0, no prefill row),
// N the request's output tokens; a PERF-REAL-v1 configuration's pooled
// decode with tg128 at depth 0.
func peerRows(confs []*Config, peers []LlamaBench) []peerRow {
	var rows []peerRow
	for _, c := range confs {
		if c.Device != "cuda" || !c.Full() {
			continue
		}
		same := func(l LlamaBench) bool { return l.Arch == c.Arch && l.Seed == c.Seed }
		add := func(what string, ours float64, match func(LlamaBench) bool) {
			for _, l := range peers {
				if same(l) && match(l) {
					rows = append(rows, peerRow{c: c, what: what, ours: ours, peer: l, gpuMatches: c.GPU != "" && c.GPU == l.GPU})
				}
			}
		}
		switch {
		case len(c.Prefills) > 0:
			for _, p := range c.Prefills {
				if r := p.TokS(); r > 0 {
					add(fmt.Sprintf("prefill %s (%s)", p.Prompt, tokens(p.Tokens)), r, func(l LlamaBench) bool {
						return l.NGen == 0 && l.NDepth == 0 && l.NPrompt == p.Tokens
					})
				}
			}
		case len(c.Depths) > 0:
			for _, d := range c.Depths {
				if r := d.PrefillTokS(); d.Tokens > 1 && r > 0 {
					add(fmt.Sprintf("prefill of %s (%s)", d.Prompt, tokens(d.Tokens)), r, func(l LlamaBench) bool {
						return l.NGen == 0 && l.NDepth == 0 && l.NPrompt == d.Tokens
					})
				}
				if d.DecodeSeconds <= 0 || d.DecodeTokens <= 0 {
					continue
				}
				depth := d.Tokens
				if depth <= 1 {
					depth = 0
				}
				add(fmt.Sprintf("decode after %s (%s), %d out", d.Prompt, tokens(d.Tokens), d.Output), float64(d.DecodeTokens)/d.DecodeSeconds,
					func(l LlamaBench) bool { return l.NPrompt == 0 && l.NGen == d.Output && l.NDepth == depth })
			}
		case c.DecodeTokens > 0 && c.DecodeSeconds > 0:
			add("pooled decode", c.DecodeTokS(), func(l LlamaBench) bool { return l.NPrompt == 0 && l.NGen == 128 && l.NDepth == 0 })
		}
	}
	return rows
}

// WritePeer writes the llama.cpp peer section at heading level (2: "##"):
// each full-residency cuda configuration's measurements beside llama-bench's
// tests of the same synthetic checkpoint (peerRows), with the peer's build
// and settings, and the ratio only where both ran on the same GPU (the
// records' environment.gpu against llama-bench's gpu_info). They are
// context, not claims: docs/peers.md says what differs (Q4_0 against our
// INT4 records, llama.cpp's own kernels and activation precisions).
func WritePeer(w io.Writer, confs []*Config, peers []LlamaBench, level int) error {
	if len(peers) == 0 {
		return errors.New("ceilings: no llama-bench results")
	}
	h := strings.Repeat("#", max(1, level))
	fmt.Fprintf(w, "\n%s Peer: llama.cpp (llama-bench) on the same synthetic checkpoints\n\n", h)
	fmt.Fprintf(w, "Context, not a claim (docs/peers.md). Our numbers: each full-residency cuda configuration's isolated prefill of a T-token prompt against llama-bench's ppT; its decode after a d-token prompt (d0: one token) against tgN at depth d (d0: an empty context), N its output tokens, and that d-token prompt's isolated prefill against ppd; a PERF-REAL-v1 configuration's pooled decode (after its ~57-token prompts) against tg128. ")
	fmt.Fprintf(w, "llama.cpp: synthetic weights converted by its own converter, routed experts Q4_0 and the rest F16 as scripts/llamacpp/gguf_synth.py makes them, each model's run (build, GPU, settings) listed below, mean ± stddev over its repetitions. The ratio is given only where the records' GPU is llama-bench's.\n\n")
	type runKey struct{ commit, gpu, backends, model, kv string }
	seen := map[runKey]bool{}
	var runs []string
	for _, l := range peers {
		k := runKey{l.BuildCommit, l.GPU, l.Backends, l.ModelType, l.TypeK + "/" + l.TypeV}
		if seen[k] {
			continue
		}
		seen[k] = true
		fa := "off"
		if l.FlashAttn != 0 {
			fa = "on"
		}
		runs = append(runs, fmt.Sprintf("- %s-%d: llama.cpp %s (%s) on %s, %s, flash attention %s, %d layers on the GPU, batch %d / ubatch %d, KV %s/%s, %d repetitions (%s)",
			l.Arch, l.Seed, l.BuildCommit, l.Backends, l.GPU, l.ModelType, fa, l.NGPULayers, l.NBatch, l.NUBatch, l.TypeK, l.TypeV, len(l.SamplesTS), l.File))
	}
	sort.Strings(runs)
	fmt.Fprintf(w, "%s\n\n", strings.Join(runs, "\n"))
	rows := peerRows(confs, peers)
	if len(rows) == 0 {
		fmt.Fprintf(w, "No full-residency cuda configuration of these editions has a llama-bench test of its checkpoint to compare with.\n")
		return nil
	}
	fmt.Fprintf(w, "| edition | configuration | ours | our GPU | ours (tok/s) | llama.cpp test | llama.cpp (tok/s) | llama.cpp GPU | ours / llama.cpp |\n")
	fmt.Fprintf(w, "| --- | --- | --- | --- | ---: | --- | ---: | --- | ---: |\n")
	for _, r := range rows {
		ratio := "- (other GPU)"
		if r.gpuMatches {
			ratio = fmt.Sprintf("%.2fx", r.ours/r.peer.AvgTS)
		}
		gpu := r.c.GPU
		if gpu == "" {
			gpu = "several or none"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %.1f | %s | %.1f ± %.1f | %s | %s |\n", r.c.Edition, r.c.ID, r.what, gpu, r.ours,
			r.peer.Test(), r.peer.AvgTS, r.peer.StddevTS, r.peer.GPU, ratio)
	}
	return nil
}

// tokens is "1 token" or "n tokens".
func tokens(n int) string {
	if n == 1 {
		return "1 token"
	}
	return fmt.Sprintf("%d tokens", n)
}
