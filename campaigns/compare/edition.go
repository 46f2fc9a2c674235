package compare

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/horizon-runmap/horizon/editions"
)

// ErrNotEdition is returned for a directory argument that is missing or is
// not an edition (no manifest.json, no configs/*.json).
var ErrNotEdition = errors.New("not an edition directory")

const gib = 1 << 30

// Edition is what a comparison needs of one edition: its configurations
// (aggregates and per-block observations) and, from its raw records, the
// contract and the environment.
type Edition struct {
	Dir      string
	Name     string // the manifest's edition id
	Contract editions.ContractRef
	Env      Env
	Configs  []*Config // sorted by id
}

// Env is the build and environment of an edition's workers: each field the
// distinct values over its raw records, sorted and joined by ", ".
type Env struct {
	Device, GPU, Driver, GoVersion, VCSRevision, VCSModified string
}

// Config is one configuration of an edition.
type Config struct {
	ID                 string
	Decode, TTFT, VRAM Metric
	// Tokens are the generated token ids of every measured request, by
	// block and prompt ("block-<k>/<prompt id>", with "#<n>" appended to
	// the n-th repeat of a prompt within a block).
	Tokens map[string][]int
	setup  []namedValue // the setup fields compared (see newConfig)
}

func (e *Edition) config(id string) *Config {
	i := sort.Search(len(e.Configs), func(i int) bool { return e.Configs[i].ID >= id })
	if i < len(e.Configs) && e.Configs[i].ID == id {
		return e.Configs[i]
	}
	return nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// Load reads the edition at dir: its manifest (for its id), every
// configs/*.json and the raw records each lists in its workers. A missing
// directory, or one without manifest.json or configuration documents, is
// ErrNotEdition; an unreadable or inconsistent document is another error.
func Load(dir string) (*Edition, error) {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%s: %w: no such directory", dir, ErrNotEdition)
	case err != nil:
		return nil, fmt.Errorf("%s: %w: %v", dir, ErrNotEdition, err)
	case !st.IsDir():
		return nil, fmt.Errorf("%s: %w: not a directory", dir, ErrNotEdition)
	}
	mpath := filepath.Join(dir, editions.ManifestFile)
	if _, err := os.Stat(mpath); err != nil {
		return nil, fmt.Errorf("%s: %w: no %s (give an edition, e.g. editions/smoke-cpu)", dir, ErrNotEdition, editions.ManifestFile)
	}
	var m editions.Manifest
	if err := readJSON(mpath, &m); err != nil {
		return nil, err
	}
	if m.Schema != editions.SchemaManifest {
		return nil, fmt.Errorf("%s: %w: %s has schema %q, want %q", dir, ErrNotEdition, editions.ManifestFile, m.Schema, editions.SchemaManifest)
	}
	files, err := filepath.Glob(filepath.Join(dir, "configs", "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: %w: no configs/*.json", dir, ErrNotEdition)
	}
	sort.Strings(files)
	e := &Edition{Dir: dir, Name: m.Edition}
	if e.Name == "" {
		e.Name = filepath.Base(dir)
	}
	var env [6][]string
	var contracts []editions.ContractRef
	for _, f := range files {
		var d editions.ConfigDoc
		if err := readJSON(f, &d); err != nil {
			return nil, err
		}
		if d.Schema != editions.SchemaConfig {
			return nil, fmt.Errorf("%s: schema %q, want %q", f, d.Schema, editions.SchemaConfig)
		}
		if len(d.Workers) == 0 {
			return nil, fmt.Errorf("%s: lists no raw records (workers)", f)
		}
		var recs []*editions.RawRecord
		for _, w := range d.Workers {
			r := new(editions.RawRecord)
			if err := readJSON(filepath.Join(dir, filepath.FromSlash(w)), r); err != nil {
				return nil, fmt.Errorf("configuration %s: %w", d.ID, err)
			}
			if r.ConfigID != d.ID {
				return nil, fmt.Errorf("%s: %s is a record of configuration %q", f, w, r.ConfigID)
			}
			recs = append(recs, r)
			contracts = append(contracts, r.Contract)
			b := r.Environment.Build
			for i, v := range []string{r.Environment.Device, r.Environment.GPU, r.Environment.Driver, b.GoVersion, b.VCSRevision, b.VCSModified} {
				env[i] = append(env[i], v)
			}
		}
		e.Configs = append(e.Configs, newConfig(&d, recs))
	}
	for _, c := range contracts[1:] {
		if c != contracts[0] {
			return nil, fmt.Errorf("%s: its raw records were measured under two contracts, %s (sha256 %s) and %s (sha256 %s): run horizon-verify on it",
				dir, contracts[0].ID, contracts[0].SHA256, c.ID, c.SHA256)
		}
	}
	e.Contract = contracts[0]
	e.Env = Env{joinDistinct(env[0]), joinDistinct(env[1]), joinDistinct(env[2]), joinDistinct(env[3]), joinDistinct(env[4]), joinDistinct(env[5])}
	sort.Slice(e.Configs, func(i, j int) bool { return e.Configs[i].ID < e.Configs[j].ID })
	return e, nil
}

// newConfig takes the metrics from the configuration document and the
// per-block observations and tokens from its records (in block order).
func newConfig(d *editions.ConfigDoc, recs []*editions.RawRecord) *Config {
	m := &d.Metrics
	c := &Config{ID: d.ID, Tokens: map[string][]int{}}
	c.Decode = Metric{Value: m.PooledDecodeTokS, Blocks: Range{Min: m.BlockSpread.Min.Value, Max: m.BlockSpread.Max.Value}}
	if !m.BlockSpread.Min.Ok() || !m.BlockSpread.Max.Ok() {
		// One output token per request: no decode interval in any block.
		c.Decode.Blocks = Range{Status: editions.Unknown}
	}
	c.TTFT.Value = editions.Observed(m.TTFTMeanS * 1e3)
	c.VRAM.Value = scaleObs(m.VRAMPeakBytes, gib)
	ttft := Range{Min: math.Inf(1), Max: math.Inf(-1)}
	var vram []editions.Obs[int64]
	var setup [13][]string
	for _, r := range recs {
		if len(r.Requests) > 0 {
			var sum float64
			for _, q := range r.Requests {
				sum += q.TTFTSeconds
			}
			mean := sum / float64(len(r.Requests)) * 1e3
			ttft.Min, ttft.Max = math.Min(ttft.Min, mean), math.Max(ttft.Max, mean)
		}
		vram = append(vram, r.Observations.VRAMPeakBytes)
		seen := map[string]int{}
		for _, q := range r.Requests {
			k := "block-" + strconv.Itoa(r.Block) + "/" + q.PromptID
			if n := seen[k]; n > 0 {
				seen[k]++
				k += "#" + strconv.Itoa(n)
			} else {
				seen[k] = 1
			}
			c.Tokens[k] = q.TokenIDs
		}
		s := r.Setup
		for i, v := range []string{r.Checkpoint.SHA256, r.Artifact.SHA256, s.Executor, strconv.Itoa(s.Capacity), s.Placement, s.Policy,
			orDefault(s.Transport, "staged"), orDefault(s.StepMode, "ops"), orDefault(s.Prefetch, "off"), orDefault(s.Overlap, "off"),
			r.Artifact.KVDTypeOf(), r.Artifact.ExpertActivationDTypeOf(), r.Artifact.DenseActivationDTypeOf()} {
			setup[i] = append(setup[i], v)
		}
	}
	if math.IsInf(ttft.Min, 0) {
		ttft = Range{Status: editions.Unknown}
	}
	c.TTFT.Blocks = ttft
	c.VRAM.Blocks = obsRange(vram, gib)
	for i, name := range []string{"checkpoint_sha256", "artifact_sha256", "executor", "capacity", "placement", "policy",
		"transport", "step_mode", "prefetch", "overlap", "kv_dtype", "expert_activation_dtype", "dense_activation_dtype"} {
		c.setup = append(c.setup, namedValue{name, joinDistinct(setup[i])})
	}
	return c
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// scaleObs is an integer observation divided by scale; its status stays.
func scaleObs(o editions.Obs[int64], scale float64) editions.Obs[float64] {
	if !o.Ok() {
		return editions.Obs[float64]{Status: o.Status}
	}
	return editions.Observed(float64(o.Value) / scale)
}

// obsRange is min..max of observations divided by scale, under the rule
// for absent observations of the aggregates (campaigns/report): any
// UNKNOWN makes it UNKNOWN, all UNSUPPORTED stays UNSUPPORTED, UNSUPPORTED
// mixed with numbers is UNKNOWN.
func obsRange(obs []editions.Obs[int64], scale float64) Range {
	unsupported := 0
	for _, o := range obs {
		switch o.Status {
		case editions.Unknown:
			return Range{Status: editions.Unknown}
		case editions.Unsupported:
			unsupported++
		}
	}
	switch {
	case len(obs) == 0 || unsupported > 0 && unsupported < len(obs):
		return Range{Status: editions.Unknown}
	case unsupported == len(obs):
		return Range{Status: editions.Unsupported}
	}
	r := Range{Min: math.Inf(1), Max: math.Inf(-1)}
	for _, o := range obs {
		v := float64(o.Value) / scale
		r.Min, r.Max = math.Min(r.Min, v), math.Max(r.Max, v)
	}
	return r
}
