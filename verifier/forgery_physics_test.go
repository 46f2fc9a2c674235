package verifier

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/horizon-runmap/horizon/editions"
)

// The physics family of consistent forgeries: each edits raw records in a
// way every shallow check accepts once forge has re-derived the rest, and
// check physics must name it.
func init() {
	forgeries = append(forgeries,
		forgery{family: "physics", name: "misses halved in one worker", want: IDPhysCacheIdentity, apply: forgeHalveOneWorker},
		forgery{family: "physics", name: "misses halved in every block of a configuration with a sibling", want: IDPhysCacheIdentity, apply: forgeHalveWithSibling},
		forgery{family: "physics", name: "one configuration's token timestamps halved", want: IDPhysWallClock, apply: forgeHalveTimestamps},
		forgery{family: "physics", name: "last block replaced by a copy of block 1", want: IDPhysIdenticalTimings, apply: forgeCopyBlock},
		forgery{family: "physics", name: "one worker's vcs_revision changed", want: IDPhysBuild, apply: forgeRevision},
		forgery{family: "physics", name: "a configuration's transport changed", want: IDPhysCampaignSetup, apply: forgeTransport},
		forgery{family: "physics", name: "VRAM peak lowered below the placement", want: IDPhysVRAMFloor, apply: forgeVRAMFloor},
		forgery{family: "physics", name: "RSS peaks lowered below the host authority", want: IDPhysRSSFloor, apply: forgeRSSFloor},
		forgery{family: "physics", name: "EOS set changed with a token replaced by the old EOS id", want: IDPhysEOSPreset, apply: forgeEOS},
		forgery{family: "physics", name: "prompt token ids altered in every worker", want: IDPhysPromptBytes, apply: forgePromptIDs},
	)
}

// rawTrees reads every raw record of configuration id, by block.
func rawTrees(t *testing.T, dir, id string) (paths []string, docs []map[string]any) {
	t.Helper()
	for _, p := range rawPathsOf(t, dir, id) {
		paths = append(paths, p)
		docs = append(docs, readTree(t, dir, p))
	}
	return paths, docs
}

func isPartial(t *testing.T, d map[string]any) bool {
	return numInt(t, at(t, d, "setup", "capacity")) < numInt(t, at(t, d, "setup", "model", "experts_per_layer"))
}

// halveMisses halves every per-layer miss count of every request of raw d
// and moves the counters with it as a careful forger would: misses are the
// new sum, hits keep hits + misses, evictions, copies and bytes drop by the
// same number of loads. It reports whether anything changed.
func halveMisses(t *testing.T, d map[string]any) bool {
	t.Helper()
	rb := numInt(t, at(t, d, "artifact", "record_bytes"))
	changed := false
	for _, q := range arr(t, d, "requests") {
		c := obj(t, q, "cache")
		lm := arr(t, c, "layer_misses")
		var sum int64
		for l := range lm {
			x := numInt(t, lm[l]) / 2
			lm[l] = json.Number(strconv.FormatInt(x, 10))
			sum += x
		}
		delta := numInt(t, c["misses"]) - sum
		if delta == 0 {
			continue
		}
		changed = true
		set := func(k string, x int64) { c[k] = json.Number(strconv.FormatInt(x, 10)) }
		set("misses", sum)
		set("hits", numInt(t, c["hits"])+delta)
		set("evictions", numInt(t, c["evictions"])-delta)
		copies := numInt(t, c["h2d_copies"]) - delta
		set("h2d_copies", copies)
		set("h2d_bytes", copies*rb)
	}
	return changed
}

func writeRaw(t *testing.T, dir, p string, d map[string]any) { writeJSON(t, dir, p, d) }

func forgeHalveOneWorker(t *testing.T, dir string) {
	for _, id := range configIDs(t, dir) {
		paths, docs := rawTrees(t, dir, id)
		if len(docs) < 2 || !isPartial(t, docs[0]) {
			continue
		}
		last := len(docs) - 1
		if halveMisses(t, docs[last]) {
			writeRaw(t, dir, paths[last], docs[last])
			forge(t, dir)
			return
		}
	}
	t.Skip("no partial-residency configuration with two blocks and misses")
}

// cacheKeyOf is the test's own statement of the cache settings that must
// give identical counters (every committed executor shares numerics).
func cacheKeyOf(t *testing.T, d map[string]any) string {
	s := obj(t, d, "setup")
	prefetch, _ := s["prefetch"].(string)
	if prefetch == "" {
		prefetch = "off"
	}
	prefill, _ := s["prefill"].(string)
	if prefill == "" {
		prefill = "token" // records from before the field (physics_cache.go cacheSettings)
	}
	return fmt.Sprint(at(t, d, "checkpoint", "sha256"), at(t, d, "artifact", "expert_format"), s["capacity"], s["placement"], s["policy"],
		prefetch, s["spares"], prefill, at(t, d, "environment", "device"))
}

func forgeHalveWithSibling(t *testing.T, dir string) {
	groups := map[string][]string{}
	var keys []string
	for _, id := range configIDs(t, dir) {
		_, docs := rawTrees(t, dir, id)
		if len(docs) == 0 || !isPartial(t, docs[0]) {
			continue
		}
		k := cacheKeyOf(t, docs[0])
		if groups[k] == nil {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], id)
	}
	var pick []string
	for _, k := range keys {
		if len(groups[k]) >= 2 {
			pick = groups[k]
			break
		}
	}
	if pick == nil {
		// No sibling (the fixture): add one, the way a campaign adds a
		// configuration that differs only in the transport.
		if len(keys) == 0 {
			t.Skip("no partial-residency configuration")
		}
		src := groups[keys[0]][0]
		pick = []string{src, addTransportTwin(t, dir, src)}
	}
	// Halve the last by id: on a tie the majority is the first, so the
	// report then names the forged configuration.
	sort.Strings(pick)
	victim := pick[len(pick)-1]
	paths, docs := rawTrees(t, dir, victim)
	changed := false
	for i := range docs {
		if halveMisses(t, docs[i]) {
			changed = true
			writeRaw(t, dir, paths[i], docs[i])
		}
	}
	if !changed {
		t.Skip("the sibling configuration has no misses")
	}
	forge(t, dir)
}

// addTransportTwin adds configuration <id>-twin to the campaign: id with
// the registered transport, its raw records copied with distinct timings
// (a microsecond later per token) an hour later. It returns the new id.
func addTransportTwin(t *testing.T, dir, id string) string {
	t.Helper()
	twin := id + "-twin"
	edit(t, dir, editions.CampaignFile, func(d map[string]any) {
		cfgs := arr(t, d, "campaign", "configurations")
		for _, c := range cfgs {
			if c.(map[string]any)["id"] == id {
				cp := deepCopy(t, c).(map[string]any)
				cp["id"], cp["transport"], cp["staging"] = twin, "registered", json.Number("0")
				obj(t, d, "campaign")["configurations"] = append(cfgs, cp)
				return
			}
		}
		t.Fatalf("campaign has no configuration %s", id)
	})
	paths, docs := rawTrees(t, dir, id)
	for i, d := range docs {
		d["config_id"] = twin
		obj(t, d, "setup")["transport"] = "registered"
		for _, q := range arr(t, d, "requests") {
			q := q.(map[string]any)
			ns := arr(t, q, "token_ns")
			for j := range ns {
				ns[j] = json.Number(strconv.FormatInt(numInt(t, ns[j])+int64(j+1)*1000, 10))
			}
			setTimings(t, q)
		}
		for _, k := range []string{"started_at", "finished_at"} {
			x, err := time.Parse(time.RFC3339Nano, d[k].(string))
			if err != nil {
				t.Fatal(err)
			}
			d[k] = x.Add(time.Hour).Format(time.RFC3339Nano)
		}
		_, block, _ := parseRawPath(paths[i])
		writeRaw(t, dir, editions.RawPath(twin, block), d)
	}
	return twin
}

func forgeHalveTimestamps(t *testing.T, dir string) {
	id := configIDs(t, dir)[0]
	paths, docs := rawTrees(t, dir, id)
	detectable := false
	for i, d := range docs {
		var removed float64
		for _, q := range arr(t, d, "requests") {
			q := q.(map[string]any)
			before := numFloat(t, q["runtime_seconds"])
			ns := arr(t, q, "token_ns")
			for j := range ns {
				ns[j] = json.Number(strconv.FormatInt(numInt(t, ns[j])/2, 10))
			}
			setTimings(t, q)
			removed += before - q["runtime_seconds"].(float64) // setTimings writes float64
		}
		// The wall-clock check tolerates max(1 s, 10%) of unaccounted
		// time (physics_time.go): a worker whose requests are so fast
		// that halving them hides inside that slack is, by design, not
		// caught by it (a reproduction or a signature is).
		start, end, err := parseWall(fmt.Sprint(d["started_at"]), fmt.Sprint(d["finished_at"]))
		if err != nil {
			t.Fatal(err)
		}
		if wall := end.Sub(start).Seconds(); removed > wallGapAllowed(wall)+0.3 {
			detectable = true
		}
		writeRaw(t, dir, paths[i], d)
	}
	if !detectable {
		t.Skipf("%s: halving its token timestamps removes less than the wall-clock slack from every worker: undetectable by the wall-clock check by design", id)
	}
	forge(t, dir)
}

func forgeCopyBlock(t *testing.T, dir string) {
	id := configIDs(t, dir)[0]
	paths, docs := rawTrees(t, dir, id)
	if len(docs) < 2 {
		t.Skip("one block only")
	}
	last := len(docs) - 1
	cp := docs[0]
	cp["block"] = json.Number(strconv.Itoa(last + 1))
	writeRaw(t, dir, paths[last], cp)
	forge(t, dir)
}

func forgeRevision(t *testing.T, dir string) {
	p := firstRaw(t, dir)
	edit(t, dir, p, func(d map[string]any) {
		obj(t, d, "environment", "build")["vcs_revision"] = strings.Repeat("0123456789", 4)
	})
	forge(t, dir)
}

func forgeTransport(t *testing.T, dir string) {
	id := configIDs(t, dir)[0]
	for _, p := range rawPathsOf(t, dir, id) {
		edit(t, dir, p, func(d map[string]any) {
			s := obj(t, d, "setup")
			if s["transport"] == "registered" {
				s["transport"] = "staged"
			} else {
				s["transport"] = "registered"
			}
		})
	}
	forge(t, dir)
}

func forgeVRAMFloor(t *testing.T, dir string) {
	for _, id := range configIDs(t, dir) {
		for _, p := range rawPathsOf(t, dir, id) {
			d := readTree(t, dir, p)
			o := obj(t, d, "observations")
			if at(t, d, "environment", "device") != "cuda" {
				continue
			}
			if _, ok := o["vram_peak_bytes"].(json.Number); !ok {
				continue
			}
			placed := numInt(t, at(t, d, "preparation", "h2d_bytes"))
			dev, proc := placed-1<<20, placed-2<<20
			lowerVRAM(t, o, dev, proc)
			writeRaw(t, dir, p, d)
			forge(t, dir)
			return
		}
	}
	t.Skip("no cuda worker with an observed VRAM peak")
}

func forgeEOS(t *testing.T, dir string) {
	first := readTree(t, dir, firstRaw(t, dir))
	ckpt := at(t, first, "checkpoint", "sha256")
	type raw struct {
		p string
		d map[string]any
	}
	var raws []raw
	used := map[int64]bool{}
	for _, id := range configIDs(t, dir) {
		paths, docs := rawTrees(t, dir, id)
		for i, d := range docs {
			if at(t, d, "checkpoint", "sha256") != ckpt {
				continue
			}
			raws = append(raws, raw{paths[i], d})
			for _, x := range arr(t, d, "warmup", "token_ids") {
				used[numInt(t, x)] = true
			}
			for _, q := range arr(t, d, "requests") {
				for _, x := range arr(t, q, "token_ids") {
					used[numInt(t, x)] = true
				}
			}
		}
	}
	old := numInt(t, arr(t, first, "setup", "model", "eos_token_ids")[0])
	vocab := numInt(t, at(t, first, "setup", "model", "vocab"))
	fresh := int64(-1)
	for x := vocab - 1; x >= 0; x-- {
		if x != old && !used[x] {
			fresh = x
			break
		}
	}
	if fresh < 0 {
		t.Skip("every token id is used")
	}
	newEOS := []any{json.Number(strconv.FormatInt(fresh, 10))}
	configs := map[string]bool{}
	for _, r := range raws {
		obj(t, r.d, "setup", "model")["eos_token_ids"] = newEOS
		arr(t, r.d, "requests", 0, "token_ids")[0] = json.Number(strconv.FormatInt(old, 10))
		writeRaw(t, dir, r.p, r.d)
		configs[r.d["config_id"].(string)] = true
	}
	// The configuration documents carry the model too.
	for id := range configs {
		edit(t, dir, editions.ConfigPath(id), func(d map[string]any) {
			obj(t, d, "model")["eos_token_ids"] = newEOS
		})
	}
	forge(t, dir)
}

func forgePromptIDs(t *testing.T, dir string) {
	for _, id := range configIDs(t, dir) {
		for _, p := range rawPathsOf(t, dir, id) {
			edit(t, dir, p, func(d map[string]any) {
				ids := arr(t, d, "requests", 0, "prompt_token_ids")
				bumpToken(t, d, ids, 0)
			})
		}
	}
	forge(t, dir)
}

// forgeRSSFloor lowers every worker's RSS peak to half its host authority
// (a run that "needed" less host memory than the experts it holds), then
// re-derives the aggregates and claims.
func forgeRSSFloor(t *testing.T, dir string) {
	for _, id := range configIDs(t, dir) {
		for _, p := range rawPathsOf(t, dir, id) {
			d := readTree(t, dir, p)
			o := obj(t, d, "observations")
			if _, ok := o["rss_peak_bytes"].(json.Number); !ok {
				t.Skip("this edition did not observe RSS")
			}
			auth := numInt(t, at(t, d, "preparation", "authority_bytes"))
			o["rss_peak_bytes"] = json.Number(strconv.FormatInt(auth/2, 10))
			writeRaw(t, dir, p, d)
		}
	}
	forge(t, dir)
}

// lowerVRAM sets a record's observations to VRAM peaks of dev (device)
// and proc (process) bytes and keeps its timeline behind them.
func lowerVRAM(t *testing.T, o map[string]any, dev, proc int64) {
	t.Helper()
	o["vram_peak_bytes"] = json.Number(strconv.FormatInt(dev, 10))
	if _, ok := o["vram_process_peak_bytes"].(json.Number); ok {
		o["vram_process_peak_bytes"] = json.Number(strconv.FormatInt(proc, 10))
	}
	if tl, ok := o["vram_timeline"].([]any); ok {
		for _, s := range tl {
			s := s.(map[string]any)
			if numInt(t, s["device_used_bytes"]) > dev {
				s["device_used_bytes"] = json.Number(strconv.FormatInt(dev, 10))
			}
			if x, ok := s["process_used_bytes"].(json.Number); ok && numInt(t, x) > proc {
				s["process_used_bytes"] = json.Number(strconv.FormatInt(proc, 10))
			}
		}
	}
}
