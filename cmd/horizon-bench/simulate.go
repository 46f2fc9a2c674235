package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/horizon-runmap/horizon/editions"
	"github.com/horizon-runmap/horizon/eviction"
)

func simulateCommand() *cli.Command {
	// -o and --output share one destination: trailingFlags sets a flag
	// by the name it was given, and urfave/cli keeps an alias's value
	// apart otherwise.
	output := new(string)
	return &cli.Command{
		Name:      "simulate",
		Usage:     "replay an edition's recorded routing traces offline under other policies and capacities, down to Belady's MIN",
		UsageText: "horizon-bench simulate EDITION_DIR [--configs a,b] [--policy lru,fifo,lfu,arc,belady] [--capacity 8,16,...] [-o md|csv|json] [--prefetch] [--waves recorded|published-first]",
		Description: `Reads the routing traces of the edition's raw records (warmup.routing_trace and
requests[i].routing_trace, eviction-trace-v1 or -v2) and replays them through the
cache's model (package eviction) under every policy and capacity asked:
each worker (raw/<config>/block-<k>.json) from a fresh cache at the recorded
initial placement, its warmup then its requests in order, summed over the
workers. Misses, lookups and missed bytes (misses x record bytes) count the
measured requests, as the records do; the warmup replays first, uncounted
(warmup_misses). belady is Belady's MIN, the offline optimum: on a miss with
the layer full it evicts the resident expert, outside the routed group,
whose next use is farthest (never again first); it bounds every online
policy from below.

Prefetch events are dropped unless --prefetch: every policy then answers the
demand-paging question that Belady bounds. With --prefetch, online policies
replay the recorded prefetches as the cache did (Belady ignores them).

predicted_decode_tok_s = 1 / (full-residency time per token + missed bytes
per step / H2D bandwidth): the time per token is the pooled decode time of
the edition's full-residency configuration of the same checkpoint
(capacity = experts; the same executor preferred), the bandwidth the median
of the configuration's workers' measured pinned H2D bandwidth, and the
missed bytes are spread over every forward step of the requests (prompt +
N - 1 per request, prefill included), as horizon-bench ceilings does. It is
null (UNKNOWN) without such a configuration or a measured bandwidth.
measured_decode_tok_s is the recorded pooled decode rate, on the row of the
recorded policy and capacity only (and, for a configuration recorded with
prefetch, only with --prefetch); recorded_misses beside it is the records'
own count, which the replay of that row reproduces.

--waves published-first replays each layer of each batched prefill (its
consecutive batch events) with the experts the model holds resident when
the batch begins first, as runtime/engine does since session 42: what an
edition recorded in first-use order would have missed under that rule.
The online policies only (Belady replays recorded waves: leave it out of
--policy, as the default then does); recorded_misses and measured decode
are left out, since they belong to the recorded waves.

--capacity defaults to the recorded capacity plus a sweep: top-k, then every
multiple of experts/8 up to the expert count. --policy defaults to every
declared policy and belady. -o md (default) ends with LRU's misses against
Belady's per configuration and capacity, and the best online policy's ratio
to Belady. The fields are the same in every format; csv and md print a null
as UNKNOWN (predicted) or - (not recorded).

Example:

  horizon-bench simulate editions/smoke-cpu --policy lru,lfu,arc,belady --capacity 4,8,16 -o json
  horizon-bench simulate editions/prefill-v1 --configs olmoe-0924-c30-grouped-batched --policy lru --waves published-first

Editions written before routing traces were recorded cannot be simulated
(exit 2).`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "configs", Usage: "comma-separated configuration `IDS` (default: every configuration with traces)"},
			&cli.StringFlag{Name: "policy", Value: strings.Join(append(eviction.Policies(), eviction.PolicyBelady), ","), Usage: "comma-separated `POLICIES`"},
			&cli.StringFlag{Name: "capacity", Usage: "comma-separated `CAPACITIES` (experts per layer; default: recorded + sweep)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "md", Destination: output, Usage: "output `FORMAT`: md, csv or json"},
			&cli.BoolFlag{Name: "prefetch", Usage: "replay recorded prefetch events for the online policies"},
			&cli.StringFlag{Name: "waves", Value: eviction.WavesRecorded, Usage: "batched prefill waves: `RULE` recorded, or published-first (each layer's batch with its resident experts first)"},
		},
		Action: func(c *cli.Context) error { return runSimulate(c, output) },
	}
}

type simRecord struct {
	Edition    string `json:"edition"`
	ConfigID   string `json:"config_id"`
	Block      int    `json:"block"`
	Checkpoint struct {
		Arch string `json:"arch"`
		Seed *int64 `json:"seed"`
	} `json:"checkpoint"`
	Artifact struct {
		RecordBytes int64 `json:"record_bytes"`
	} `json:"artifact"`
	Setup struct {
		Model struct {
			Layers          int `json:"layers"`
			ExpertsPerLayer int `json:"experts_per_layer"`
			TopK            int `json:"top_k"`
		} `json:"model"`
		Capacity  int    `json:"capacity"`
		Executor  string `json:"executor"`
		Placement string `json:"placement"`
		Policy    string `json:"policy"`
		Transport string `json:"transport"`
		Prefetch  string `json:"prefetch"`
	} `json:"setup"`
	Warmup struct {
		RoutingTrace *editions.RoutingTrace `json:"routing_trace"`
	} `json:"warmup"`
	Requests []struct {
		PromptTokens  int     `json:"prompt_tokens"`
		N             int     `json:"n"`
		DecodeSeconds float64 `json:"decode_seconds"`
		Cache         struct {
			Misses int64 `json:"misses"`
		} `json:"cache"`
		RoutingTrace *editions.RoutingTrace `json:"routing_trace"`
	} `json:"requests"`
	Observations struct {
		H2DBandwidth json.RawMessage `json:"h2d_bandwidth_bytes_per_s"` // a number, or "UNKNOWN"
	} `json:"observations"`
}

// simConfig is one configuration of the edition, its records summed.
type simConfig struct {
	ID, Arch, Executor, Transport string
	Seed                          int64
	Layers, Experts, TopK         int
	Capacity                      int
	Policy, Placement, Prefetch   string
	RecordBytes                   int64
	Workers                       []eviction.Worker // by block; nil without traces
	traced, untraced              int               // records with and without traces
	DecodeTokens, Steps           int64
	DecodeSeconds                 float64
	RecordedMisses                int64
	H2DBW                         []float64
}

func (c *simConfig) full() bool { return c.Capacity == c.Experts }

// h2d is the median of the workers' measured bandwidths (0: none).
func (c *simConfig) h2d() float64 {
	if len(c.H2DBW) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(c.H2DBW))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// loadSimEdition reads every raw record of the edition at dir, by
// configuration, sorted by id; it returns the edition's name.
func loadSimEdition(dir string) (string, []*simConfig, error) {
	files, err := filepath.Glob(filepath.Join(dir, "raw", "*", "block-*.json"))
	if err != nil {
		return "", nil, fmt.Errorf("simulate: %w", err)
	}
	if len(files) == 0 {
		return "", nil, usageError("simulate: %s has no raw records (raw/<config>/block-<k>.json): is it an edition directory?", dir)
	}
	type rec struct {
		r    simRecord
		file string
	}
	var recs []rec
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", nil, fmt.Errorf("simulate: %w", err)
		}
		var r simRecord
		if err := json.Unmarshal(b, &r); err != nil {
			return "", nil, fmt.Errorf("simulate: %s: %w", f, err)
		}
		recs = append(recs, rec{r, f})
	}
	sort.SliceStable(recs, func(i, j int) bool {
		if recs[i].r.ConfigID != recs[j].r.ConfigID {
			return recs[i].r.ConfigID < recs[j].r.ConfigID
		}
		return recs[i].r.Block < recs[j].r.Block
	})
	edition := ""
	byID := map[string]*simConfig{}
	var out []*simConfig
	for _, x := range recs {
		r, f := &x.r, x.file
		edition = r.Edition
		c := byID[r.ConfigID]
		if c == nil {
			s := r.Setup
			c = &simConfig{ID: r.ConfigID, Arch: r.Checkpoint.Arch, Executor: s.Executor, Transport: s.Transport,
				Layers: s.Model.Layers, Experts: s.Model.ExpertsPerLayer, TopK: s.Model.TopK, Capacity: s.Capacity,
				Policy: s.Policy, Placement: s.Placement, Prefetch: s.Prefetch, RecordBytes: r.Artifact.RecordBytes}
			if c.Policy == "" {
				c.Policy = eviction.DefaultPolicy
			}
			if c.Placement == "" {
				c.Placement = eviction.DefaultPlacement
			}
			if c.Prefetch == "" {
				c.Prefetch = "off"
			}
			if r.Checkpoint.Seed != nil {
				c.Seed = *r.Checkpoint.Seed
			}
			byID[r.ConfigID] = c
			out = append(out, c)
		}
		for _, q := range r.Requests {
			c.DecodeTokens += int64(q.N - 1)
			c.DecodeSeconds += q.DecodeSeconds
			c.Steps += int64(q.PromptTokens + q.N - 1)
			c.RecordedMisses += q.Cache.Misses
		}
		var bw float64
		if json.Unmarshal(r.Observations.H2DBandwidth, &bw) == nil && bw > 0 {
			c.H2DBW = append(c.H2DBW, bw)
		}
		w, ok, err := recordTraces(r)
		if err != nil {
			return "", nil, fmt.Errorf("simulate: %s: %w", f, err)
		}
		if !ok {
			c.untraced++
			continue
		}
		c.traced++
		c.Workers = append(c.Workers, w)
	}
	for _, c := range out {
		if c.traced > 0 && c.untraced > 0 {
			return "", nil, fmt.Errorf("simulate: %s/%s: %d of its %d records carry routing traces: a partial replay would not be the configuration's", dir, c.ID, c.traced, c.traced+c.untraced)
		}
	}
	return edition, out, nil
}

// recordTraces returns a record's worker trace; false when the record has
// none at all (written before traces were recorded).
func recordTraces(r *simRecord) (eviction.Worker, bool, error) {
	reqs := make([]*editions.RoutingTrace, len(r.Requests))
	for i := range r.Requests {
		reqs[i] = r.Requests[i].RoutingTrace
	}
	return editions.TraceWorker(r.Warmup.RoutingTrace, reqs)
}

// fullReference finds the full-residency configuration of the same
// checkpoint, preferring the same executor, then the same transport; nil
// when the edition has none.
func fullReference(p *simConfig, all []*simConfig) *simConfig {
	var best *simConfig
	score := -1
	for _, c := range all {
		if !c.full() || c.Arch != p.Arch || c.Seed != p.Seed || c.Experts != p.Experts || c.DecodeTokens <= 0 || c.DecodeSeconds <= 0 {
			continue
		}
		s := 0
		if c.Executor == p.Executor {
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

// simRow is one (configuration, policy, capacity) replay.
type simRow struct {
	Config, Policy, Waves   string
	Capacity                int
	Lookups, Misses         int64
	MissRatio               float64
	MissedBytes, Evictions  int64
	WarmupMisses            int64
	RecordedMisses          *int64
	PredictedTokS, Measured *float64
}

// simField is one output column: its name, its JSON value and its text in
// md and csv.
type simField struct {
	name string
	json func(r *simRow) any
	text func(r *simRow) string
}

func optText[T any](v *T, null string, f func(T) string) string {
	if v == nil {
		return null
	}
	return f(*v)
}

func itoa(v int64) string   { return strconv.FormatInt(v, 10) }
func tokS(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// simFields is the one field list of every output format.
var simFields = []simField{
	{"config", func(r *simRow) any { return r.Config }, func(r *simRow) string { return r.Config }},
	{"policy", func(r *simRow) any { return r.Policy }, func(r *simRow) string { return r.Policy }},
	{"capacity", func(r *simRow) any { return r.Capacity }, func(r *simRow) string { return strconv.Itoa(r.Capacity) }},
	{"waves", func(r *simRow) any { return r.Waves }, func(r *simRow) string { return r.Waves }},
	{"lookups", func(r *simRow) any { return r.Lookups }, func(r *simRow) string { return itoa(r.Lookups) }},
	{"misses", func(r *simRow) any { return r.Misses }, func(r *simRow) string { return itoa(r.Misses) }},
	{"miss_ratio", func(r *simRow) any { return r.MissRatio }, func(r *simRow) string { return strconv.FormatFloat(r.MissRatio, 'f', 6, 64) }},
	{"missed_bytes", func(r *simRow) any { return r.MissedBytes }, func(r *simRow) string { return itoa(r.MissedBytes) }},
	{"evictions", func(r *simRow) any { return r.Evictions }, func(r *simRow) string { return itoa(r.Evictions) }},
	{"warmup_misses", func(r *simRow) any { return r.WarmupMisses }, func(r *simRow) string { return itoa(r.WarmupMisses) }},
	{"recorded_misses", func(r *simRow) any { return r.RecordedMisses }, func(r *simRow) string { return optText(r.RecordedMisses, "-", itoa) }},
	{"predicted_decode_tok_s", func(r *simRow) any { return r.PredictedTokS }, func(r *simRow) string { return optText(r.PredictedTokS, "UNKNOWN", tokS) }},
	{"measured_decode_tok_s", func(r *simRow) any { return r.Measured }, func(r *simRow) string { return optText(r.Measured, "-", tokS) }},
}

// simOptions are the simulate command's parsed flags.
type simOptions struct {
	configs    []string
	policies   []string
	capacities []int
	output     string
	prefetch   bool
	waves      string
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func parseSimulateArgs(c *cli.Context, output *string) (string, simOptions, error) {
	dir, err := trailingFlags(c, positional{"edition", "edition directory", "horizon-bench simulate editions/smoke-cpu"})
	if err != nil {
		return "", simOptions{}, err
	}
	o := simOptions{configs: splitList(c.String("configs")), policies: splitList(c.String("policy")), output: *output, prefetch: c.Bool("prefetch"),
		waves: c.String("waves")}
	if !slices.Contains([]string{"md", "csv", "json"}, o.output) {
		return "", o, usageError("simulate: -o %q: want md, csv or json", o.output)
	}
	if !slices.Contains(eviction.WaveRules(), o.waves) {
		return "", o, usageError("simulate: --waves %q: want %s", o.waves, strings.Join(eviction.WaveRules(), " or "))
	}
	if o.waves != eviction.WavesRecorded {
		if !c.IsSet("policy") {
			o.policies = eviction.Policies()
		} else if slices.Contains(o.policies, eviction.PolicyBelady) {
			return "", o, usageError("simulate: --waves %s: %s replays the recorded waves only; leave it out of --policy", o.waves, eviction.PolicyBelady)
		}
	}
	if len(o.policies) == 0 {
		return "", o, usageError("simulate: --policy names no policy")
	}
	known := append(eviction.Policies(), eviction.PolicyBelady)
	for _, p := range o.policies {
		if !slices.Contains(known, p) {
			return "", o, usageError("simulate: --policy %q: want one of %s", p, strings.Join(known, ","))
		}
	}
	for _, s := range splitList(c.String("capacity")) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return "", o, usageError("simulate: --capacity %q: want positive integers, e.g. 8,16,32", s)
		}
		o.capacities = append(o.capacities, n)
	}
	return dir, o, nil
}

// capacities returns the capacities to replay a configuration at, sorted:
// those given, or the recorded one plus top-k and every multiple of
// experts/8 up to the expert count.
func (o simOptions) capacitiesFor(c *simConfig) ([]int, error) {
	caps := slices.Clone(o.capacities)
	if len(caps) == 0 {
		caps = append(caps, c.Capacity, c.TopK)
		step := max(1, c.Experts/8)
		for n := step; n <= c.Experts; n += step {
			if n >= c.TopK {
				caps = append(caps, n)
			}
		}
		caps = append(caps, c.Experts)
	}
	for _, n := range caps {
		if n < c.TopK || n > c.Experts {
			return nil, usageError("simulate: %s: capacity %d outside %d..%d (top-k..experts)", c.ID, n, c.TopK, c.Experts)
		}
	}
	slices.Sort(caps)
	return slices.Compact(caps), nil
}

func runSimulate(c *cli.Context, output *string) error {
	dir, o, err := parseSimulateArgs(c, output)
	if err != nil {
		return err
	}
	if err := residencyEdition("simulate", dir); err != nil {
		return err
	}
	edition, all, err := loadSimEdition(dir)
	if err != nil {
		return err
	}
	var chosen []*simConfig
	if len(o.configs) > 0 {
		for _, id := range o.configs {
			i := slices.IndexFunc(all, func(c *simConfig) bool { return c.ID == id })
			if i < 0 {
				return usageError("simulate: %s has no configuration %q", dir, id)
			}
			if all[i].traced == 0 {
				return usageError("simulate: %s/%s has no routing traces (recorded before traces were): nothing to replay", dir, id)
			}
			chosen = append(chosen, all[i])
		}
	} else {
		for _, sc := range all {
			if sc.traced > 0 {
				chosen = append(chosen, sc)
			}
		}
		if len(chosen) == 0 {
			return usageError("simulate: %s has no routing traces (its raw records were written before traces were recorded): re-run its campaign to simulate it", dir)
		}
	}
	rows, err := simulateRows(chosen, all, o)
	if err != nil {
		return err
	}
	w := c.App.Writer
	switch o.output {
	case "json":
		return writeSimJSON(w, rows)
	case "csv":
		return writeSimCSV(w, rows)
	}
	return writeSimMD(w, edition, chosen, all, rows, o)
}

func simulateRows(chosen, all []*simConfig, o simOptions) ([]*simRow, error) {
	var rows []*simRow
	for _, sc := range chosen {
		caps, err := o.capacitiesFor(sc)
		if err != nil {
			return nil, err
		}
		ref := fullReference(sc, all)
		bw := sc.h2d()
		for _, capacity := range caps {
			for _, pol := range o.policies {
				cfg := eviction.Config{Layers: sc.Layers, Experts: sc.Experts, Capacity: capacity, Policy: pol,
					Placement: sc.Placement, RecordBytes: sc.RecordBytes, GroupSize: sc.TopK}
				res, err := eviction.SimulateWaves(cfg, o.prefetch, o.waves, sc.Workers)
				if err != nil {
					return nil, fmt.Errorf("simulate: %s: %w", sc.ID, err)
				}
				r := &simRow{Config: sc.ID, Policy: pol, Capacity: capacity, Waves: o.waves, Lookups: res.Lookups, Misses: res.Misses,
					MissRatio: res.MissRatio(), MissedBytes: res.Misses * sc.RecordBytes, Evictions: res.Evictions, WarmupMisses: res.WarmupMisses}
				if ref != nil && bw > 0 && sc.Steps > 0 {
					step := ref.DecodeSeconds/float64(ref.DecodeTokens) + float64(r.MissedBytes)/float64(sc.Steps)/bw
					v := 1 / step
					r.PredictedTokS = &v
				}
				if pol == sc.Policy && capacity == sc.Capacity && (sc.Prefetch == "off" || o.prefetch) && o.waves == eviction.WavesRecorded {
					m := sc.RecordedMisses
					r.RecordedMisses = &m
					if sc.DecodeSeconds > 0 {
						v := float64(sc.DecodeTokens) / sc.DecodeSeconds
						r.Measured = &v
					}
				}
				rows = append(rows, r)
			}
		}
	}
	return rows, nil
}

// writeSimJSON writes a JSON array, one row object per line, its keys in
// simFields order.
func writeSimJSON(w io.Writer, rows []*simRow) error {
	var b strings.Builder
	b.WriteString("[\n")
	for i, r := range rows {
		b.WriteString("  {")
		for j, f := range simFields {
			v, err := json.Marshal(f.json(r))
			if err != nil {
				return fmt.Errorf("simulate: %s: %w", f.name, err)
			}
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%q: %s", f.name, v)
		}
		b.WriteString("}")
		if i < len(rows)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString("]\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func writeSimCSV(w io.Writer, rows []*simRow) error {
	var b strings.Builder
	for i, f := range simFields {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(f.name)
	}
	b.WriteString("\n")
	for _, r := range rows {
		for i, f := range simFields {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(csvQuote(f.text(r)))
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func csvQuote(s string) string {
	if strings.ContainsAny(s, ",\"\n") {
		return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
	}
	return s
}

func writeSimMD(w io.Writer, edition string, chosen, all []*simConfig, rows []*simRow, o simOptions) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# Offline policy simulation: %s\n\n", edition)
	p("Each worker's recorded routing trace (warmup, then its requests) replayed from a fresh cache at the recorded placement; ")
	p("misses count the measured requests, summed over workers. belady is Belady's MIN (offline optimum). ")
	if o.prefetch {
		p("Recorded prefetch events are replayed for the online policies (Belady ignores them, so it bounds demand misses without prefetch only).\n\n")
	} else {
		p("Prefetch events are dropped: every row is demand paging.\n\n")
	}
	if o.waves == eviction.WavesPublishedFirst {
		p("Batched prefill waves are replayed published first: each layer's batch with the experts resident when it begins first, as runtime/engine serves them since session 42; recorded misses and measured decode belong to the recorded waves and are not shown.\n\n")
	}
	p("Predicted decode = 1 / (full-residency time per token + missed bytes per step / H2D bandwidth), missed bytes spread over every forward step (prefill included).\n\n")
	p("| configuration | experts | top-k | recorded policy | recorded capacity | placement | prefetch | workers | full-residency reference | full (ms/token) | H2D (GB/s) |\n")
	p("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, sc := range chosen {
		ref, refMS, bw := "UNKNOWN", "UNKNOWN", "UNKNOWN"
		if r := fullReference(sc, all); r != nil {
			ref, refMS = r.ID, strconv.FormatFloat(1e3*r.DecodeSeconds/float64(r.DecodeTokens), 'f', 3, 64)
		}
		if v := sc.h2d(); v > 0 {
			bw = strconv.FormatFloat(v/1e9, 'g', 4, 64)
		}
		p("| %s | %d | %d | %s | %d | %s | %s | %d | %s | %s | %s |\n", sc.ID, sc.Experts, sc.TopK, sc.Policy, sc.Capacity, sc.Placement, sc.Prefetch, len(sc.Workers), ref, refMS, bw)
	}
	p("\n## Replays\n\n|")
	for _, f := range simFields {
		p(" %s |", f.name)
	}
	p("\n|")
	for range simFields {
		p("---|")
	}
	p("\n")
	for _, r := range rows {
		p("|")
		for _, f := range simFields {
			p(" %s |", f.text(r))
		}
		p("\n")
	}
	p("\n## LRU and the best online policy against Belady\n\n")
	if !slices.Contains(o.policies, "lru") || !slices.Contains(o.policies, eviction.PolicyBelady) {
		p("Not computed: --policy must include lru and belady.\n")
	} else {
		p("Best online: the declared policy with the fewest misses (policies tied with it joined by =).\n\n")
		p("| configuration | capacity | LRU misses | Belady misses | LRU / Belady | best online | its misses | best / Belady |\n")
		p("|---|---|---|---|---|---|---|---|\n")
		ratio := func(a, b int64) string {
			if b == 0 {
				if a == 0 {
					return "1.00"
				}
				return "inf"
			}
			return strconv.FormatFloat(float64(a)/float64(b), 'f', 2, 64)
		}
		for _, sc := range chosen {
			byCap := map[int][]*simRow{}
			var caps []int
			for _, r := range rows {
				if r.Config == sc.ID {
					if byCap[r.Capacity] == nil {
						caps = append(caps, r.Capacity)
					}
					byCap[r.Capacity] = append(byCap[r.Capacity], r)
				}
			}
			for _, capacity := range caps {
				var lru, opt, best *simRow
				for _, r := range byCap[capacity] {
					switch {
					case r.Policy == eviction.PolicyBelady:
						opt = r
					default:
						if r.Policy == "lru" {
							lru = r
						}
						if best == nil || r.Misses < best.Misses {
							best = r
						}
					}
				}
				var tied []string
				for _, r := range byCap[capacity] {
					if r.Policy != eviction.PolicyBelady && r.Misses == best.Misses {
						tied = append(tied, r.Policy)
					}
				}
				p("| %s | %d | %d | %d | %s | %s | %d | %s |\n", sc.ID, capacity, lru.Misses, opt.Misses, ratio(lru.Misses, opt.Misses), strings.Join(tied, "="), best.Misses, ratio(best.Misses, opt.Misses))
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
