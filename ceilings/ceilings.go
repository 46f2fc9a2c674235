// Package ceilings puts an edition's measured speeds beside what bounds
// them: the HBM bytes a decode step reads against the GPU's memory
// bandwidth, the expert bytes a partial-residency step copies against the
// pinned host-to-device bandwidth each worker measured, the whole-worker
// VRAM against the weights and KV cache it holds, and a peer baseline
// measured on the same synthetic weights. Everything is recomputed from the
// raw records of committed editions (and a baseline JSON from
// scripts/baseline_hf.py); `horizon-bench ceilings` prints it as Markdown.
//
// The partial-residency check is issue 7's: decode time per token within
// PartialFactor x (full-residency time + missed bytes / measured H2D
// bandwidth). Misses are counted per request, prefill included, so the
// missed bytes per decode step are the request's H2D bytes spread evenly
// over its steps (prompt tokens + N - 1); the exact request-level form,
// (runtime of the partial request) / (runtime of the same full-residency
// request + its H2D bytes / bandwidth), is reported beside it.
package ceilings

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/horizon-runmap/horizon/editions"
	"github.com/horizon-runmap/horizon/modelspec"
)

// Options set the bandwidths and limits the report measures against.
type Options struct {
	// HBMBytesPerS is the memory bandwidth ceiling and HBMSource says where
	// the figure comes from.
	HBMBytesPerS float64
	HBMSource    string
	// GPU is the GPU these figures (HBMBytesPerS and the arithmetic rates)
	// belong to, as raw records name it (environment.gpu). A cuda
	// configuration measured on another GPU has no ceiling here: its
	// ceiling columns read UNKNOWN, and the section names it.
	GPU string
	// PartialFactor bounds a partial configuration's decode time per token
	// against its model (issue 7: 1.2).
	PartialFactor float64
	// VRAMAllowance is what the whole-worker VRAM may exceed resident
	// weights + KV cache by (issue 7: 0.7 GiB).
	VRAMAllowance int64
	// VRAMProcess judges the VRAM limit on the process's reading (its NVML
	// entry, what nvidia-smi shows for the process), as issue 14 asks, with
	// the device reading's margin beside it (the default, for edition
	// reports and horizon-bench ceilings alike). False judges the device
	// reading, which adds the driver's reservation.
	VRAMProcess bool
	// The arithmetic ceiling of batched prefill (prefill.go): the tensor-core
	// rate its matrix products run at (SplitFactor x their FLOPs: the FP16
	// hi/lo split) and the CUDA-core rate its attention runs at.
	SplitFactor                  float64
	TensorFLOPS, CUDACoreFLOPS   float64
	TensorSource, CUDACoreSource string
}

// DefaultOptions are issue 7's limits and the H200 copy bandwidth measured
// on this workplace's machines (../shared/GPU-NOTES.md).
func DefaultOptions() Options {
	return Options{
		HBMBytesPerS:   4.26e12,
		HBMSource:      "H200 device-to-device copy, 1-4 GiB, bytes read + written (GPU-NOTES.md)",
		GPU:            "NVIDIA H200",
		PartialFactor:  1.2,
		VRAMAllowance:  7 * (1 << 30) / 10,
		VRAMProcess:    true,
		SplitFactor:    2,
		TensorFLOPS:    989e12,
		TensorSource:   "H200 dense FP16 tensor cores, NVIDIA's figure; the mma.sync kernels reach less",
		CUDACoreFLOPS:  67e12,
		CUDACoreSource: "H200 FP32 CUDA cores, NVIDIA's figure",
	}
}

// Config is one configuration of an edition, summed over its raw records.
type Config struct {
	Edition, ID string
	Device      string // "cuda" or "cpu"
	// GPU is environment.gpu of the configuration's records, "" when they
	// name different GPUs.
	GPU               string
	Arch              string // synthetic preset
	Seed              int64
	Executor          string
	Capacity, Experts int
	Transport         string // "staged" when not recorded
	StepMode          string // "ops" when not recorded
	Model             editions.Model
	RecordBytes       int64
	// KVDType is the KV cache's element type the workers ran
	// (artifact.kv_dtype): FP32 (also where not recorded) or FP16.
	KVDType string

	Requests      int
	DecodeTokens  int64   // sum(N-1)
	DecodeSeconds float64 // sum(decode_seconds)
	RuntimeS      float64 // sum(runtime_seconds)
	Steps         int64   // sum(prompt tokens + N - 1): forward passes
	H2DBytes      int64
	Misses        int64
	MaxSeq        int // the most positions one request used (prompt + N - 1)

	// Depths are the configuration's decode per prompt, in first-seen
	// order, when its edition's contract declares prompt lengths and
	// decodes (PERF-DEPTH-v1: one prompt per context depth); nil otherwise.
	Depths []*Depth
	// Prefills are the configuration's isolated prefill per prompt, in
	// first-seen order, when its edition's contract declares prompt lengths
	// and one output token (PERF-PREFILL-v1); nil otherwise. PrefillMode is
	// setup.prefill ("token" where not recorded).
	Prefills    []*PrefillLen
	PrefillMode string

	H2DBW        []float64          // per worker, bytes/s
	VRAMPeak     int64              // device-wide, max over workers; -1 not observed
	VRAMProcPeak int64              // this process, max over workers; -1 not observed
	runtimeByReq map[string]float64 // by key(block, prompt)
	h2dByRequest map[string]int64
}

// Depth is one context depth's decode over a configuration's requests of
// that prompt.
type Depth struct {
	Prompt        string
	Tokens        int     // the prompt's (the depth's) tokens
	Output        int     // N, output tokens per request
	DecodeTokens  int64   // sum(N-1)
	DecodeSeconds float64 // sum(decode_seconds)
	// PrefillTimed counts the requests whose prefill_seconds (the depth's
	// isolated prefill) is an observation; PrefillSeconds sums them.
	PrefillTimed   int
	PrefillSeconds float64
}

// PrefillTokS is the depth's pooled isolated prefill rate over its timed
// requests (0 when none was timed).
func (d *Depth) PrefillTokS() float64 {
	return pooledPrefill(d.PrefillTimed, d.Tokens, d.PrefillSeconds)
}

// key names a request within a configuration: block and prompt.
func key(block int, prompt string) string { return fmt.Sprintf("%d/%s", block, prompt) }

// DecodeTokS is the pooled decode rate sum(N-1)/sum(decode seconds).
func (c *Config) DecodeTokS() float64 { return float64(c.DecodeTokens) / c.DecodeSeconds }

// Full reports whether every expert is resident.
func (c *Config) Full() bool { return c.Capacity == c.Experts }

// MedianH2D is the median of the workers' measured H2D bandwidths (0 when
// none was observed).
func (c *Config) MedianH2D() float64 {
	if len(c.H2DBW) == 0 {
		return 0
	}
	s := slices.Clone(c.H2DBW)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// LoadEdition reads every raw record of the edition at dir, grouped by
// configuration in first-seen order.
func LoadEdition(dir string) ([]*Config, error) {
	files, err := filepath.Glob(filepath.Join(dir, "raw", "*", "block-*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("ceilings: %s: no raw records (raw/<config>/block-<k>.json)", dir)
	}
	sort.Strings(files)
	depths, err := declaresDepths(dir)
	if err != nil {
		return nil, err
	}
	prefills, err := declaresPrefill(dir)
	if err != nil {
		return nil, err
	}
	byID := map[string]*Config{}
	var out []*Config
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("ceilings: %w", err)
		}
		var r editions.RawRecord
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("ceilings: %s: %w", f, err)
		}
		c := byID[r.ConfigID]
		if c == nil {
			c = &Config{Edition: r.Edition, ID: r.ConfigID, Device: r.Environment.Device, GPU: r.Environment.GPU, Arch: r.Checkpoint.Arch, Executor: r.Setup.Executor,
				Capacity: r.Setup.Capacity, Experts: r.Setup.Model.ExpertsPerLayer, Transport: r.Setup.Transport,
				StepMode: r.Setup.StepMode, Model: r.Setup.Model, RecordBytes: r.Artifact.RecordBytes,
				VRAMPeak: -1, VRAMProcPeak: -1, runtimeByReq: map[string]float64{}, h2dByRequest: map[string]int64{}}
			if r.Checkpoint.Seed != nil {
				c.Seed = *r.Checkpoint.Seed
			}
			if c.Transport == "" {
				c.Transport = "staged"
			}
			if c.StepMode == "" {
				c.StepMode = "ops"
			}
			if c.PrefillMode = r.Setup.Prefill; c.PrefillMode == "" {
				c.PrefillMode = "token"
			}
			c.KVDType = r.Artifact.KVDTypeOf()
			byID[r.ConfigID] = c
			out = append(out, c)
		}
		if r.Environment.GPU != c.GPU {
			c.GPU = ""
		}
		for _, q := range r.Requests {
			steps := int64(q.PromptTokens + q.N - 1)
			c.Requests++
			c.DecodeTokens += int64(q.N - 1)
			c.DecodeSeconds += q.DecodeSeconds
			c.RuntimeS += q.RuntimeSeconds
			c.Steps += steps
			c.H2DBytes += q.Cache.H2DBytes
			c.Misses += q.Cache.Misses
			c.MaxSeq = max(c.MaxSeq, q.PromptTokens+q.N-1)
			k := key(r.Block, q.PromptID)
			c.runtimeByReq[k] += q.RuntimeSeconds
			c.h2dByRequest[k] += q.Cache.H2DBytes
			if depths {
				c.addDepth(q)
			}
			if prefills {
				c.addPrefill(q)
			}
		}
		o := r.Observations
		if o.H2DBandwidthBytesPerS.Ok() {
			c.H2DBW = append(c.H2DBW, o.H2DBandwidthBytesPerS.Value)
		}
		if o.VRAMPeakBytes.Ok() {
			c.VRAMPeak = max(c.VRAMPeak, o.VRAMPeakBytes.Value)
		}
		if o.VRAMProcessPeakBytes.Ok() {
			c.VRAMProcPeak = max(c.VRAMProcPeak, o.VRAMProcessPeakBytes.Value)
		}
	}
	for _, c := range out {
		if c.Requests > 0 && c.DecodeTokens == 0 && len(c.Prefills) > 0 {
			continue // a prefill contract's configuration: its prefill is reported, not a decode
		}
		if c.DecodeSeconds <= 0 || c.Requests == 0 {
			return nil, fmt.Errorf("ceilings: %s/%s: no decode time in its records (with one output token per request, as under PERF-PREFILL-v1, there is no decode rate to set beside a ceiling)", dir, c.ID)
		}
	}
	return out, nil
}

// declaresDepths reports whether the edition at dir was made under a
// contract that declares its prompts' lengths and decodes after them
// (contract.json: a prompt_rule and output_tokens >= 2, PERF-DEPTH-v1's
// shape), whose decode is reported per depth. An edition without
// contract.json has none.
func declaresDepths(dir string) (bool, error) {
	rule, out, err := contractShape(dir)
	return rule && out >= 2, err
}

// contractShape reads the edition at dir's contract.json: whether it
// declares a prompt_rule (prompt lengths), and its output_tokens. An
// edition without contract.json has neither.
func contractShape(dir string) (promptRule bool, outputTokens int, err error) {
	b, err := os.ReadFile(filepath.Join(dir, "contract.json"))
	if errors.Is(err, os.ErrNotExist) {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, fmt.Errorf("ceilings: %w", err)
	}
	var doc struct {
		Contract struct {
			OutputTokens int             `json:"output_tokens"`
			PromptRule   json.RawMessage `json:"prompt_rule"`
		} `json:"contract"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return false, 0, fmt.Errorf("ceilings: %s: %w", filepath.Join(dir, "contract.json"), err)
	}
	return len(doc.Contract.PromptRule) > 0 && string(doc.Contract.PromptRule) != "null", doc.Contract.OutputTokens, nil
}

// addDepth adds request q to its prompt's Depth.
func (c *Config) addDepth(q editions.Request) {
	var d *Depth
	for _, x := range c.Depths {
		if x.Prompt == q.PromptID {
			d = x
		}
	}
	if d == nil {
		d = &Depth{Prompt: q.PromptID, Tokens: q.PromptTokens, Output: q.N}
		c.Depths = append(c.Depths, d)
	}
	d.DecodeTokens += int64(q.N - 1)
	d.DecodeSeconds += q.DecodeSeconds
	if q.PrefillSeconds != nil && q.PrefillSeconds.Ok() {
		d.PrefillTimed++
		d.PrefillSeconds += q.PrefillSeconds.Value
	}
}

// KVBytesPerPosition is what one position of the KV cache holds for a
// synthetic preset: K and V of every layer in kvDType (artifact.kv_dtype:
// FP32, 4 bytes an element, also for ""; FP16, 2).
func KVBytesPerPosition(arch, kvDType string) (int64, error) {
	p, err := modelspec.LookupPreset(arch)
	if err != nil {
		return 0, fmt.Errorf("ceilings: %w", err)
	}
	return int64(p.Config.NumLayers) * 2 * int64(p.Config.KVDim()) * kvElementBytes(kvDType), nil
}

// kvElementBytes is a KV cache element's size by artifact.kv_dtype.
func kvElementBytes(kvDType string) int64 {
	if kvDType == editions.KVFP16 {
		return 2
	}
	return 4
}

// kvWords says what the KV cache of confs holds: FP32 K and V, unless
// some configuration ran another element type.
func kvWords(confs []*Config) string {
	for _, c := range confs {
		if c.KVDType != "" && c.KVDType != editions.KVFP32 {
			return "K and V in each configuration's KV cache element type (artifact.kv_dtype: FP32 4 bytes, FP16 2)"
		}
	}
	return "FP32 K and V"
}

// Bytes is what one decode step of a synthetic architecture reads from HBM
// at full residency, by part. Non-routed weights are FP16 and read whole
// each step except the embedding table (one row); routed experts are read
// for the top-k of every layer, whole records (qpack rows and scales).
type Bytes struct {
	NonRouted int64 // FP16 weights read per step
	Routed    int64 // TopK x layers x record bytes
	// ResidentNonRouted is the non-routed weights held on the device
	// (the whole embedding table included).
	ResidentNonRouted int64
}

// Total is the HBM bytes of one step.
func (b Bytes) Total() int64 { return b.NonRouted + b.Routed }

// StepBytes computes Bytes for a synthetic preset with records of
// recordBytes.
func StepBytes(arch string, recordBytes int64) (Bytes, error) {
	cfg, ts, err := nonRouted(arch)
	if err != nil {
		return Bytes{}, err
	}
	var b Bytes
	for _, t := range ts {
		n := 2 * t.elems
		b.ResidentNonRouted += n
		if t.Name == "model.embed_tokens.weight" {
			if cfg.TieWordEmbeddings {
				b.NonRouted += n // read whole as the lm_head
			} else {
				b.NonRouted += int64(2 * cfg.HiddenSize)
			}
			continue
		}
		b.NonRouted += n
	}
	b.Routed = int64(cfg.TopK*cfg.NumLayers) * recordBytes
	return b, nil
}

// sizedTensor is a tensor of a preset with its element count.
type sizedTensor struct {
	modelspec.TensorSpec
	elems int64
}

// nonRouted is a synthetic preset's configuration and its non-routed
// tensors (FP16 on the device) with their element counts.
func nonRouted(arch string) (modelspec.Config, []sizedTensor, error) {
	p, err := modelspec.LookupPreset(arch)
	if err != nil {
		return modelspec.Config{}, nil, fmt.Errorf("ceilings: %w", err)
	}
	var out []sizedTensor
	for _, t := range p.Config.TensorSpecs() {
		if t.Kind != modelspec.NonRouted {
			continue
		}
		n := int64(1)
		for _, d := range t.Shape {
			n *= int64(d)
		}
		out = append(out, sizedTensor{t, n})
	}
	return p.Config, out, nil
}

// Baseline is one mode of a peer baseline (scripts/baseline_hf.py output).
type Baseline struct {
	File, Mode, Arch, GPU, Transformers string
	Seed                                int64
	PooledDecodeTokS, TTFTMedianS       float64
	MemoryAllocated                     int64
	Requests                            int
	Boundaries                          map[string]string
}

// LoadBaseline reads the modes of one baseline JSON.
func LoadBaseline(path string) ([]Baseline, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("ceilings: %w", err)
	}
	var doc struct {
		Checkpoint struct {
			Arch string `json:"arch"`
			Seed int64  `json:"seed"`
		} `json:"checkpoint"`
		GPU          string            `json:"gpu"`
		Transformers string            `json:"transformers"`
		Boundaries   map[string]string `json:"boundaries"`
		Modes        []struct {
			Mode             string            `json:"mode"`
			PooledDecodeTokS float64           `json:"pooled_decode_tok_s"`
			TTFTMedianS      float64           `json:"ttft_median_s"`
			MaxAllocated     int64             `json:"max_memory_allocated_bytes"`
			Requests         []json.RawMessage `json:"requests"`
		} `json:"modes"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("ceilings: %s: %w", path, err)
	}
	if doc.Checkpoint.Arch == "" || len(doc.Modes) == 0 {
		return nil, fmt.Errorf("ceilings: %s: not a baseline_hf.py document (no checkpoint arch or no modes)", path)
	}
	var out []Baseline
	for _, m := range doc.Modes {
		out = append(out, Baseline{File: filepath.Base(path), Mode: m.Mode, Arch: doc.Checkpoint.Arch, Seed: doc.Checkpoint.Seed,
			GPU: doc.GPU, Transformers: doc.Transformers, PooledDecodeTokS: m.PooledDecodeTokS, TTFTMedianS: m.TTFTMedianS,
			MemoryAllocated: m.MaxAllocated, Requests: len(m.Requests), Boundaries: doc.Boundaries})
	}
	return out, nil
}

// fullFor finds the full-residency configuration the partial configuration
// p is measured against: same checkpoint, preferring the same executor and
// transport, then the same edition. grouped-v1 and fused-topk-v1 count as
// one executor in captured steps (the same two kernels per layer).
func fullFor(p *Config, all []*Config) *Config {
	family := func(e string) string {
		if e == "fused-topk-v1" {
			return "grouped-v1"
		}
		return e
	}
	var best *Config
	score := -1
	for _, c := range all {
		if !c.Full() || c.Arch != p.Arch || c.Seed != p.Seed {
			continue
		}
		s := 0
		if family(c.Executor) == family(p.Executor) {
			s += 4
		}
		if c.Edition == p.Edition {
			s += 2
		}
		if c.Transport == p.Transport {
			s++
		}
		if s > score {
			best, score = c, s
		}
	}
	return best
}

// Write prints the report for the configurations of the given editions and
// the baselines as Markdown.
func Write(w io.Writer, confs []*Config, baselines []Baseline, o Options) error {
	if len(confs) == 0 {
		return errors.New("ceilings: no configurations")
	}
	fmt.Fprintf(w, "# Speeds beside their ceilings\n\n")
	return WriteSections(w, confs, baselines, o, 2)
}

// Section is the ceilings section a cuda edition's reports carry (the
// runner's report.EditionInput.Ceilings): the
// sections of WriteSections at heading level 3, with DefaultOptions and no
// baseline, for the raw records under the edition directory dir; or, where
// they cannot be computed, one line that says why. ok is false in that
// case.
func Section(dir string) (text string, ok bool) {
	confs, err := LoadEdition(dir)
	var texts []string
	if err == nil {
		texts, err = sections(confs, DefaultOptions())
	}
	if err != nil {
		return fmt.Sprintf("Not computed: %v.\n", err), false
	}
	return texts[0], true
}

// SectionVersions is Section's text as the runner writes it now, then as
// earlier runners wrote it from the same raw records: before the VRAM limit
// was judged on the process's reading (issue 14), the VRAM table judged the
// device reading and had no margin column (VRAMProcess false). Every
// version recomputes every number; the verifier accepts a report whose
// section is one of them, so that an edition published by an earlier
// runner still verifies without being rewritten.
func SectionVersions(dir string) ([]string, error) {
	confs, err := LoadEdition(dir)
	if err != nil {
		return nil, err
	}
	return SectionVersionsOf(confs)
}

// SectionVersionsOf is SectionVersions of configurations LoadEdition
// returned.
func SectionVersionsOf(confs []*Config) ([]string, error) {
	legacy := DefaultOptions()
	legacy.VRAMProcess = false
	return sections(confs, DefaultOptions(), legacy)
}

// sections writes the sections for confs once per options value, in order.
func sections(confs []*Config, opts ...Options) ([]string, error) {
	var out []string
	for _, o := range opts {
		var b strings.Builder
		if err := WriteSections(&b, confs, nil, o, 3); err != nil {
			return nil, err
		}
		out = append(out, b.String())
	}
	return out, nil
}

// Rated says whether o's figures are c's GPU's: a cuda configuration whose
// records name o.GPU.
func (o Options) Rated(c *Config) bool {
	return c.Device == "cuda" && c.GPU == o.GPU
}

// unrated lists the cuda configurations o has no figures for, as
// "id (GPU)", in order.
func unrated(confs []*Config, o Options) []string {
	var out []string
	for _, c := range confs {
		if c.Device == "cuda" && !o.Rated(c) {
			g := c.GPU
			if g == "" {
				g = "records name several GPUs, or none"
			}
			out = append(out, fmt.Sprintf("%s (%s)", c.ID, g))
		}
	}
	return out
}

// HBMCeilings is each cuda configuration's decode ceiling in tok/s (HBM
// bandwidth over its HBM bytes per step, the "HBM ceiling" column of
// WriteSections), by configuration id. Configurations measured on another
// device or another GPU than o's, or of an architecture without known
// shapes, are left out.
func HBMCeilings(confs []*Config, o Options) map[string]float64 {
	out := map[string]float64{}
	for _, c := range confs {
		if !o.Rated(c) || c.DecodeTokens == 0 || c.DecodeSeconds <= 0 {
			continue
		}
		if b, err := StepBytes(c.Arch, c.RecordBytes); err == nil && b.Total() > 0 {
			out[c.ID] = o.HBMBytesPerS / float64(b.Total())
		}
	}
	return out
}

// WriteSections is Write without the title, its sections at heading level
// (2: "##"), for embedding in another report (an edition's report.md).
func WriteSections(w io.Writer, confs []*Config, baselines []Baseline, o Options, level int) error {
	if len(confs) == 0 {
		return errors.New("ceilings: no configurations")
	}
	h := strings.Repeat("#", max(1, level))
	p := func(format string, a ...any) { fmt.Fprintf(w, strings.ReplaceAll(format, "## ", h+" "), a...) }
	p("Recomputed from the raw records by `horizon-bench ceilings` (package ceilings). HBM ceiling: %.2f TB/s, %s; it applies to configurations measured on cuda only.\n\n", o.HBMBytesPerS/1e12, o.HBMSource)
	if other := unrated(confs, o); len(other) > 0 {
		p("These figures are the %s's. Configurations measured on another GPU have no ceiling here (%s): %s.\n\n", o.GPU, editions.Unknown, strings.Join(other, ", "))
	}
	// A prefill contract's configurations (one output token, no decode)
	// get the prefill section; the decode sections take the others, so
	// that editions of both kinds can be given together.
	dec, pre := splitPrefillOnly(confs)
	if len(pre) > 0 {
		if err := writePrefill(p, pre, o); err != nil {
			return err
		}
	}
	if len(dec) == 0 {
		return writeVRAM(p, confs, o)
	}
	all := confs
	confs = dec

	p("## Decode against the HBM and PCIe ceilings\n\n")
	p("HBM bytes/step: FP16 non-routed weights read each step (embedding: one row) + top-k expert records of every layer. ")
	p("Ceiling = HBM bandwidth / HBM bytes per step; partial residency adds the missed expert bytes per step over the worker-measured pinned H2D bandwidth (median of the workers).\n\n")
	p("| edition | configuration | executor | capacity | step mode | transport | pooled decode (tok/s) | HBM bytes/step (MB) | HBM ceiling (tok/s) | of ceiling | missed bytes/step (MB) | H2D (GB/s) | HBM+PCIe ceiling (tok/s) | of that |\n")
	p("| --- | --- | --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, c := range confs {
		b, err := StepBytes(c.Arch, c.RecordBytes)
		if err != nil {
			return err
		}
		tok := c.DecodeTokS()
		if c.Device != "cuda" {
			p("| %s | %s | %s | %d/%d | %s | %s | %.1f | %.0f | - | - | - | - | - | - |\n", c.Edition, c.ID, c.Executor,
				c.Capacity, c.Experts, c.StepMode, c.Transport, tok, float64(b.Total())/1e6)
			continue
		}
		if !o.Rated(c) {
			p("| %s | %s | %s | %d/%d | %s | %s | %.1f | %.0f | %s | %s | - | - | %s | %s |\n", c.Edition, c.ID, c.Executor,
				c.Capacity, c.Experts, c.StepMode, c.Transport, tok, float64(b.Total())/1e6, editions.Unknown, editions.Unknown, editions.Unknown, editions.Unknown)
			continue
		}
		ceil := o.HBMBytesPerS / float64(b.Total())
		miss := float64(c.H2DBytes) / float64(c.Steps)
		bw := c.MedianH2D()
		both, missCol, bwCol, bothCol, ofBoth := "-", "-", "-", "-", "-"
		if !c.Full() {
			missCol = fmt.Sprintf("%.1f", miss/1e6)
			if bw > 0 {
				bwCol = fmt.Sprintf("%.1f", bw/1e9)
				t := float64(b.Total())/o.HBMBytesPerS + miss/bw
				both = fmt.Sprintf("%.0f", 1/t)
				bothCol, ofBoth = both, fmt.Sprintf("%.0f%%", 100*tok*t)
			} else {
				bwCol, bothCol, ofBoth = editions.Unknown, editions.Unknown, editions.Unknown
			}
		}
		p("| %s | %s | %s | %d/%d | %s | %s | %.1f | %.0f | %.0f | %.0f%% | %s | %s | %s | %s |\n", c.Edition, c.ID, c.Executor,
			c.Capacity, c.Experts, c.StepMode, c.Transport, tok, float64(b.Total())/1e6, ceil, 100*tok/ceil, missCol, bwCol, bothCol, ofBoth)
	}

	if err := writeDepths(p, confs, o); err != nil {
		return err
	}

	p("\n## Partial residency against full residency plus transfer time\n\n")
	p("Model per decode step = full-residency time per token (the reference configuration) + missed bytes per step / measured H2D bandwidth. ")
	p("Missed bytes per step spread each request's misses (prefill included) evenly over its steps; the request-level column instead compares whole requests: sum of partial runtimes / (sum of the same requests' full-residency runtimes + H2D bytes / bandwidth). Limit: %.2fx.\n\n", o.PartialFactor)
	p("| edition | configuration | reference (full) | full (ms/token) | transfer (ms/token) | model (ms/token) | measured (ms/token) | ratio | within %.1fx | request-level ratio |\n", o.PartialFactor)
	p("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |\n")
	for _, c := range confs {
		if c.Full() {
			continue
		}
		ref := fullFor(c, confs)
		bw := c.MedianH2D()
		if ref == nil || bw <= 0 {
			why := "no full-residency configuration of this checkpoint in the editions given"
			if ref != nil {
				why = "H2D bandwidth not observed"
			}
			p("| %s | %s | - | - | - | - | %.3f | %s | %s | - |\n", c.Edition, c.ID, 1e3/c.DecodeTokS(), editions.Unknown, why)
			continue
		}
		tFull := 1 / ref.DecodeTokS()
		tMiss := float64(c.H2DBytes) / float64(c.Steps) / bw
		model := tFull + tMiss
		meas := 1 / c.DecodeTokS()
		ratio := meas / model
		ok := "yes"
		if ratio > o.PartialFactor {
			ok = fmt.Sprintf("no (+%.0f%%)", 100*(ratio/o.PartialFactor-1))
		}
		reqRatio := "-"
		var num, den float64
		for k, rt := range c.runtimeByReq {
			fr, found := ref.runtimeByReq[k]
			if !found {
				num = -1
				break
			}
			num += rt
			den += fr + float64(c.h2dByRequest[k])/bw
		}
		if num > 0 && den > 0 {
			reqRatio = fmt.Sprintf("%.2f", num/den)
		}
		p("| %s | %s | %s/%s (%s) | %.3f | %.3f | %.3f | %.3f | %.2f | %s | %s |\n", c.Edition, c.ID, ref.Edition, ref.ID, ref.Executor,
			tFull*1e3, tMiss*1e3, model*1e3, meas*1e3, ratio, ok, reqRatio)
	}

	if err := writeVRAM(p, all, o); err != nil {
		return err
	}

	p("\n## Peer baseline\n\n")
	if len(baselines) == 0 {
		p("No baseline given.\n")
		return nil
	}
	p("Hugging Face transformers on the same synthetic weights, PERF-REAL-v1 prompts, 128 greedy tokens, EOS suppressed, warmup excluded; its boundaries are in the baseline JSON (listed below). Ours: the full-residency configuration of the same checkpoint.\n\n")
	p("| baseline | mode | GPU | transformers | requests | HF pooled decode (tok/s) | ours | our pooled decode (tok/s) | speedup |\n")
	p("| --- | --- | --- | --- | ---: | ---: | --- | ---: | ---: |\n")
	for _, bl := range baselines {
		var ours *Config
		for _, c := range confs {
			if c.Full() && c.Arch == bl.Arch && c.Seed == bl.Seed && (ours == nil || c.DecodeTokS() > ours.DecodeTokS()) {
				ours = c
			}
		}
		if ours == nil {
			p("| %s | %s | %s | %s | %d | %.1f | none | - | - |\n", bl.File, bl.Mode, bl.GPU, bl.Transformers, bl.Requests, bl.PooledDecodeTokS)
			continue
		}
		p("| %s | %s | %s | %s | %d | %.1f | %s/%s | %.1f | %.1fx |\n", bl.File, bl.Mode, bl.GPU, bl.Transformers, bl.Requests,
			bl.PooledDecodeTokS, ours.Edition, ours.ID, ours.DecodeTokS(), ours.DecodeTokS()/bl.PooledDecodeTokS)
	}
	seen := map[string]bool{}
	for _, bl := range baselines {
		if seen[bl.File] || len(bl.Boundaries) == 0 {
			continue
		}
		seen[bl.File] = true
		p("\nBoundaries of %s:\n\n", bl.File)
		keys := make([]string, 0, len(bl.Boundaries))
		for k := range bl.Boundaries {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p("- **%s**: %s\n", k, strings.TrimSpace(bl.Boundaries[k]))
		}
	}
	return nil
}

// vramWithin says whether a peak (-1: not observed) is within limit.
func vramWithin(peak, limit int64) string {
	switch {
	case peak < 0:
		return editions.Unknown
	case peak > limit:
		return fmt.Sprintf("no (+%.2f GiB)", float64(peak-limit)/(1<<30))
	}
	return "yes"
}

// vramMargin is a peak's distance to limit: +x GiB above, -x GiB below.
func vramMargin(peak, limit int64) string {
	if peak < 0 {
		return editions.Unknown
	}
	return fmt.Sprintf("%+.2f GiB", float64(peak-limit)/(1<<30))
}

// writeDepths is the section of decode per context depth against its HBM
// ceiling, for the cuda configurations with per-depth decode (Depths):
// a step at depth d reads the weights and the KV cache of the positions it
// attends. A request of N output tokens after a prompt of d tokens runs its
// N - 1 decode steps over d+1 .. d+N-1 positions, d + N/2 on average, so
// the ceiling is HBM bandwidth / (weight bytes per step + (d + N/2) x KV
// bytes per position). Nothing is written when no configuration has one.
func writeDepths(p func(string, ...any), confs []*Config, o Options) error {
	var rows []*Config
	for _, c := range confs {
		if c.Device == "cuda" && len(c.Depths) > 0 {
			rows = append(rows, c)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	p("\n## Decode at context depth against the HBM ceiling\n\n")
	p("A decode step at depth d reads the HBM bytes of a step (above) and the KV cache of the positions it attends (%s): over a request's N - 1 decode steps after a d-token prompt, d + N/2 positions on average. ", kvWords(rows))
	p("Ceiling = HBM bandwidth / (weight bytes per step + (d + N/2) x KV bytes per position); at partial residency the missed expert bytes come on top (not in this ceiling).\n\n")
	p("| edition | configuration | capacity | depth | depth tokens | pooled decode (tok/s) | weights/step (MB) | KV/step (MB) | HBM ceiling (tok/s) | of ceiling |\n")
	p("| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, c := range rows {
		b, err := StepBytes(c.Arch, c.RecordBytes)
		if err != nil {
			return err
		}
		kvPos, err := KVBytesPerPosition(c.Arch, c.KVDType)
		if err != nil {
			return err
		}
		for _, d := range c.Depths {
			tok := editions.Unknown
			of := editions.Unknown
			kv := float64(kvPos) * (float64(d.Tokens) + float64(d.Output)/2)
			ceil := o.HBMBytesPerS / (float64(b.Total()) + kv)
			ceilCol := fmt.Sprintf("%.0f", ceil)
			if !o.Rated(c) {
				ceilCol = editions.Unknown
			}
			if d.DecodeSeconds > 0 && d.DecodeTokens > 0 {
				r := float64(d.DecodeTokens) / d.DecodeSeconds
				tok = fmt.Sprintf("%.1f", r)
				if o.Rated(c) {
					of = fmt.Sprintf("%.0f%%", 100*r/ceil)
				}
			}
			p("| %s | %s | %d/%d | %s | %d | %s | %.0f | %.1f | %s | %s |\n", c.Edition, c.ID, c.Capacity, c.Experts,
				d.Prompt, d.Tokens, tok, float64(b.Total())/1e6, kv/1e6, ceilCol, of)
		}
	}
	return nil
}

// writeVRAM is the section of whole-worker VRAM against resident weights +
// KV cache + the allowance.
func writeVRAM(p func(string, ...any), confs []*Config, o Options) error {
	gib := func(b int64) string {
		if b < 0 {
			return editions.Unknown
		}
		return fmt.Sprintf("%.2f", float64(b)/(1<<30))
	}
	p("\n## Whole-worker VRAM against resident weights + KV cache + %.1f GiB\n\n", float64(o.VRAMAllowance)/(1<<30))
	if o.VRAMProcess {
		p("Resident weights: every non-routed FP16 tensor + capacity x layers x record bytes. KV cache: %s for the most positions a request used. Device peak: NVML used memory of the GPU over the whole worker (max over workers). Process peak: this process's NVML entry, the reading nvidia-smi shows for the process; the device reading adds the driver's reservation (~0.6 GiB on the H200). The limit applies to the process reading (within); the device reading's margin is shown beside it.\n\n", kvWords(confs))
		p("| edition | configuration | capacity | resident weights (GiB) | KV (GiB) | limit (GiB) | device peak (GiB) | process peak (GiB) | within (process) | device reading vs limit |\n")
		p("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |\n")
	} else {
		p("Resident weights: every non-routed FP16 tensor + capacity x layers x record bytes. KV cache: %s for the most positions a request used. Device peak: NVML used memory of the GPU over the whole worker (max over workers); process: this process's entry.\n\n", kvWords(confs))
		p("| edition | configuration | capacity | resident weights (GiB) | KV (GiB) | limit (GiB) | device peak (GiB) | process peak (GiB) | within |\n")
		p("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
	}
	for _, c := range confs {
		b, err := StepBytes(c.Arch, c.RecordBytes)
		if err != nil {
			return err
		}
		pre, err := modelspec.LookupPreset(c.Arch)
		if err != nil {
			return err
		}
		weights := b.ResidentNonRouted + int64(c.Capacity)*int64(c.Model.Layers)*c.RecordBytes
		kv := int64(c.Model.Layers) * 2 * int64(c.MaxSeq) * int64(pre.Config.KVDim()) * kvElementBytes(c.KVDType)
		limit := weights + kv + o.VRAMAllowance
		if o.VRAMProcess {
			p("| %s | %s | %d/%d | %s | %.3f | %s | %s | %s | %s | %s |\n", c.Edition, c.ID, c.Capacity, c.Experts, gib(weights),
				float64(kv)/(1<<30), gib(limit), gib(c.VRAMPeak), gib(c.VRAMProcPeak), vramWithin(c.VRAMProcPeak, limit),
				vramMargin(c.VRAMPeak, limit))
			continue
		}
		p("| %s | %s | %d/%d | %s | %.3f | %s | %s | %s | %s |\n", c.Edition, c.ID, c.Capacity, c.Experts, gib(weights),
			float64(kv)/(1<<30), gib(limit), gib(c.VRAMPeak), gib(c.VRAMProcPeak), vramWithin(c.VRAMPeak, limit))
	}
	return nil
}
