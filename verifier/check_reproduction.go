package verifier

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/horizon-runmap/horizon/editions"
)

// Check reproduction (Options.Reproduction): a directory written by
// horizon-bench reproduce, which reran some of the edition's workers on
// another machine and kept both sets of raw records. The check
//
//  1. binds the record to this edition: its edition id, and the SHA-256 of
//     this edition's manifest.json (which pins every file of it);
//  2. holds each original copy to the edition's raw record byte for byte,
//     and each rerun record to its recorded size and hash and to the
//     identity (edition, configuration, block, contract, device) and the
//     timestamp arithmetic of a worker of this edition;
//  3. recomputes every comparison the record states, with its own code,
//     from the edition's raw records and the rerun records: prompts, output
//     tokens and the cache counters per request, the warmup, the pooled
//     decode rate of each configuration over the rerun blocks, the speed
//     ratio and the tolerance verdict, and under a contract with declared
//     prompt lengths each prompt's prefill and decode-at-depth comparisons
//     (recomputed with recomputePrefillLength and recomputeDecodeDepth);
//     any disagreement is an error;
//  4. reports each claim (the per-prompt claims of prefill_lengths and
//     decode_depths entries too): reproduced (a hint, informational), not
//     reproduced (an error: the rerun's tokens, prompts or counters
//     differ), a measurement outside the declared tolerance (a hint stating
//     the ratio: speed is reported, not enforced), or not rerun.
//
// Weak spots, admitted: the rerun records are as trustworthy as the machine
// and the person that made them; the check proves that the record is
// consistent with them and that they agree with the edition, not that the
// rerun really happened elsewhere. A forger who can write the edition's raw
// records can write matching "rerun" records too; what a reproduction adds
// is a second, independently produced set of records that someone else can
// produce again. Rerun timings are held to their own timestamps, not to
// plausibility.
var (
	IDReproUnreadable         = def("reproduction", "reproduction.unreadable", Error, "the reproduction directory or its reproduction.json cannot be read, is not horizon.reproduction version 1, or does not validate against its schema")
	IDReproEdition            = def("reproduction", "reproduction.edition-mismatch", Error, "the reproduction record names another edition id, or another manifest.json SHA-256, than this edition (its current manifest or one it had before a republication)")
	IDReproBeforeRepublish    = def("reproduction", "reproduction.before-republish", Hint, "the reproduction was made from the edition's manifest before a republication; its raw records are the edition's (checked per worker)")
	IDReproRecord             = def("reproduction", "reproduction.record-invalid", Error, "the record is malformed: a file path off the layout, a worker listed twice, a configuration or block this edition does not have, a configuration summary without its workers, or a stray file under original/ or rerun/")
	IDReproOriginal           = def("reproduction", "reproduction.original-mismatch", Error, "an original copy is not byte-identical to the edition's raw record, or its recorded size or SHA-256 is not the edition's")
	IDReproRerun              = def("reproduction", "reproduction.rerun-record", Error, "a rerun raw record is missing or undecodable, differs from its recorded size or SHA-256, is not a worker of this edition's configuration, block, contract and device, or its timings contradict its timestamps")
	IDReproComparison         = def("reproduction", "reproduction.comparison-mismatch", Error, "a comparison stated in reproduction.json (identical flags, first token difference, counter differences, pooled decode, speed ratio, tolerance verdict, per-prompt prefill and decode-at-depth comparisons, environment) differs from its recomputation from the two sets of raw records")
	IDReproDiffers            = def("reproduction", "reproduction.worker-differs", Error, "a rerun worker's prompts, output tokens or cache counters differ from the edition's worker: the edition was not reproduced there")
	IDReproArtifact           = def("reproduction", "reproduction.artifact-differs", Hint, "a rerun worker ran another prepared artifact (or checkpoint) than the edition's; its comparison still stands")
	IDReproClaimReproduced    = def("reproduction", "reproduction.claim-reproduced", Hint, "informational: a claim of a rerun configuration was reproduced (tokens, prompts and counters identical; a measurement within the declared tolerance)")
	IDReproClaimNotReproduced = def("reproduction", "reproduction.claim-not-reproduced", Error, "a claim's configuration was rerun and its tokens, prompts or cache counters differ (or its rerun records are unusable)")
	IDReproSpeedOutside       = def("reproduction", "reproduction.speed-outside-tolerance", Hint, "a timing claim's rerun value is outside the declared tolerance; the ratio is reported, speed is not enforced")
	IDReproPeakOutside        = def("reproduction", "reproduction.peak-outside-tolerance", Hint, "a memory-peak claim's rerun value is outside the declared tolerance (reported, not enforced), or was not observed in one of the runs")
	IDReproClaimNotRerun      = def("reproduction", "reproduction.claim-not-rerun", Hint, "a claim's configuration was not rerun by this reproduction: it is neither reproduced nor refuted")
	IDReproClaimUnchecked     = def("reproduction", "reproduction.claim-unchecked", Hint, "a claim of a rerun configuration whose source is not a configuration metric the reproduction compares")
	IDReproNoClaims           = def("reproduction", "reproduction.no-claims", Hint, "a rerun configuration has no claims in the edition: its reproduction reproduces no claim")
)

// reproRun is one rerun worker as the check sees it.
type reproRun struct {
	index     int // in the record's workers
	config    string
	block     int
	orig      *editions.RawRecord // the edition's record (never the copy)
	rerun     *editions.RawRecord // nil when unusable
	identical bool                // recomputed
}

// reproRecomputed is a request comparison recomputed here.
type reproRecomputed struct {
	prompt, tokens, counters bool
	first                    int
	diffs                    []string
}

func checkReproduction(v *view, fs *findings) {
	dir := v.opts.Reproduction
	if dir == "" {
		return
	}
	at := func(rel string) string { return filepath.ToSlash(filepath.Join(dir, rel)) }
	recFile := at(editions.ReproductionFile)
	d, ok := readReproduction(v, dir, recFile, fs)
	if !ok {
		return
	}

	// 1. The record belongs to this edition.
	if d.Edition != v.e.Manifest.Edition {
		fs.add(IDReproEdition, recFile, "/edition", v.e.Manifest.Edition, d.Edition,
			"the reproduction is of edition %s, this is %s", d.Edition, v.e.Manifest.Edition)
	}
	if md := v.e.docs[editions.ManifestFile]; md != nil {
		sum := sha256.Sum256(md.data)
		want := hex.EncodeToString(sum[:])
		switch lineage := v.e.Manifest.ManifestLineage(); {
		case d.EditionManifestSHA256 == want:
		case slices.Contains(lineage, d.EditionManifestSHA256):
			fs.add(IDReproBeforeRepublish, recFile, "/edition_manifest_sha256", want, d.EditionManifestSHA256,
				"the reproduction was made from the edition's manifest before a republication (manifest.json#/republished): the raw records it compares are the same, each checked below")
		default:
			fs.add(IDReproEdition, recFile, "/edition_manifest_sha256", want, d.EditionManifestSHA256,
				"the reproduction was made from another manifest.json than this edition's (or any it had before a republication): the edition changed, or the record is of another one")
		}
	}
	tol := d.SpeedTolerance
	if !(tol > 0 && tol < 1) {
		fs.add(IDReproRecord, recFile, "/speed_tolerance", "in (0, 1)", num(tol), "the declared speed tolerance is not a fraction in (0, 1)")
		return
	}

	// 2 and 3: each worker.
	var runs []*reproRun
	seen := map[string]bool{}
	listed := map[string]bool{}
	for i, w := range d.Workers {
		p := ptr("workers", i)
		key := editions.RawPath(w.ConfigID, w.Block)
		if seen[key] {
			fs.add(IDReproRecord, recFile, p, nil, key, "%s is listed twice", editions.ReproWorkerName(w.ConfigID, w.Block))
			continue
		}
		seen[key] = true
		listed[w.Original.Path], listed[w.Rerun.Path] = true, true
		r := checkReproWorker(v, dir, recFile, i, w, fs)
		if r != nil {
			runs = append(runs, r)
		}
	}
	checkReproStrays(dir, listed, at, fs)
	byConfig := checkReproConfigs(v, recFile, d, runs, fs)

	identical := len(runs) == len(d.Workers)
	for _, r := range runs {
		identical = identical && r.identical
	}
	if d.Identical != identical {
		fs.add(IDReproComparison, recFile, "/identical", identical, d.Identical, "the record's overall verdict does not recompute from its workers")
	}
	if len(runs) > 0 && runs[0].rerun != nil && !reflect.DeepEqual(d.Environment, runs[0].rerun.Environment) {
		fs.add(IDReproComparison, recFile, "/environment", nil, nil,
			"the recorded environment is not the one the first rerun worker recorded (%s on %s)", runs[0].rerun.Environment.Device, runs[0].rerun.Environment.Hostname)
	}

	// 4. Each claim.
	reproClaims(v, tol, byConfig, fs)
}

// readReproduction reads and validates reproduction.json.
func readReproduction(v *view, dir, recFile string, fs *findings) (*editions.ReproductionDoc, bool) {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		fs.add(IDReproUnreadable, filepath.ToSlash(dir), "", nil, nil, "the reproduction directory cannot be read: %v", orNotDir(err))
		return nil, false
	}
	b, err := os.ReadFile(filepath.Join(dir, editions.ReproductionFile))
	if err != nil {
		fs.add(IDReproUnreadable, recFile, "", nil, nil, "%v (is this a directory written by horizon-bench reproduce?)", err)
		return nil, false
	}
	tree, err := parseTree(b)
	if err != nil {
		fs.add(IDReproUnreadable, recFile, "", nil, nil, "not one well-formed JSON document: %v", err)
		return nil, false
	}
	var d editions.ReproductionDoc
	if err := decodeObject(b, &d); err != nil {
		fs.add(IDReproUnreadable, recFile, "", nil, nil, "does not decode as a reproduction record: %v", err)
		return nil, false
	}
	if d.Schema != editions.SchemaReproduction || d.Version != editions.Version {
		fs.add(IDReproUnreadable, recFile, "/schema", editions.SchemaReproduction, d.Schema,
			"not a horizon.reproduction version 1 document (schema %q version %d)", d.Schema, d.Version)
		return nil, false
	}
	if v.opts.Schemas == nil {
		fs.add(IDSchemaUnavailable, recFile, "", nil, nil, "no JSON Schemas were given; %s was not validated against its schema", editions.ReproductionFile)
	} else if err := v.opts.Schemas.Validate(editions.SchemaReproduction, tree); errors.Is(err, ErrNoSchema) {
		fs.add(IDSchemaUnavailable, recFile, "", nil, nil, "the schema set has no %s; %s was not validated", editions.SchemaReproduction, editions.ReproductionFile)
	} else if err != nil {
		for _, x := range violations(err) {
			fs.add(IDReproUnreadable, recFile, x.Pointer, nil, nil, "does not validate against its schema: %s", x.Message)
		}
		return nil, false
	}
	return &d, true
}

func orNotDir(err error) error {
	if err == nil {
		return errors.New("not a directory")
	}
	return err
}

// checkReproWorker checks one worker's files and recomputes its
// comparisons; nil when the worker cannot be compared at all.
func checkReproWorker(v *view, dir, recFile string, i int, w editions.ReproWorker, fs *findings) *reproRun {
	p := ptr("workers", i)
	name := editions.ReproWorkerName(w.ConfigID, w.Block)
	raw := editions.RawPath(w.ConfigID, w.Block)
	orig := v.e.raws[raw]
	en := v.e.entries[raw]
	if orig == nil || en == nil {
		fs.add(IDReproRecord, recFile, p, nil, raw, "%s: this edition has no decodable raw record %s", name, raw)
		return nil
	}
	if w.Original.Path != editions.ReproOriginalPath(w.ConfigID, w.Block) || w.Rerun.Path != editions.ReproRerunPath(w.ConfigID, w.Block) {
		fs.add(IDReproRecord, recFile, p, editions.ReproOriginalPath(w.ConfigID, w.Block)+", "+editions.ReproRerunPath(w.ConfigID, w.Block),
			w.Original.Path+", "+w.Rerun.Path, "%s: its files are not where the layout puts them", name)
		return nil
	}
	// The original copy: the edition's record, byte for byte.
	ob, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(w.Original.Path)))
	switch {
	case err != nil:
		fs.add(IDReproOriginal, recFile, p+"/original", en.sha256, nil, "%s: the original copy cannot be read: %v", name, err)
	case sha256Hex(ob) != en.sha256:
		fs.add(IDReproOriginal, recFile, p+"/original", en.sha256, sha256Hex(ob),
			"%s: the original copy is not the edition's %s (the reproduction compared against other records)", name, raw)
	}
	if w.Original.SHA256 != en.sha256 || w.Original.Bytes != en.size {
		fs.add(IDReproOriginal, recFile, p+"/original", en.sha256, w.Original.SHA256,
			"%s: the record names another original (%d bytes) than the edition's %s (%d bytes)", name, w.Original.Bytes, raw, en.size)
	}

	r := &reproRun{index: i, config: w.ConfigID, block: w.Block, orig: orig}
	rp := filepath.ToSlash(filepath.Join(dir, filepath.FromSlash(w.Rerun.Path)))
	rb, err := os.ReadFile(filepath.FromSlash(rp))
	if err != nil {
		fs.add(IDReproRerun, rp, "", nil, nil, "%s: the rerun record cannot be read: %v", name, err)
		return r
	}
	if sha256Hex(rb) != w.Rerun.SHA256 || int64(len(rb)) != w.Rerun.Bytes {
		fs.add(IDReproRerun, recFile, p+"/rerun", w.Rerun.SHA256, sha256Hex(rb), "%s: the rerun record is not the file the record names (%d bytes listed, %d found)", name, w.Rerun.Bytes, len(rb))
	}
	rerun, err := LoadRaw(rb)
	if err != nil {
		fs.add(IDReproRerun, rp, "", nil, nil, "%s: %v", name, err)
		return r
	}
	if !checkRerunIdentity(v, rp, name, orig, rerun, fs) {
		return r
	}
	r.rerun = rerun
	if orig.Artifact.SHA256 != rerun.Artifact.SHA256 || orig.Checkpoint.SHA256 != rerun.Checkpoint.SHA256 {
		fs.add(IDReproArtifact, rp, "/artifact/sha256", orig.Artifact.SHA256, rerun.Artifact.SHA256,
			"%s ran artifact %s of checkpoint %s; the edition's worker ran %s of %s", name,
			rerun.Artifact.SHA256, rerun.Checkpoint.SHA256, orig.Artifact.SHA256, orig.Checkpoint.SHA256)
	}

	// The comparisons, recomputed.
	warm := orig.Warmup.PromptID == rerun.Warmup.PromptID && slices.Equal(orig.Warmup.TokenIDs, rerun.Warmup.TokenIDs)
	if w.WarmupIdentical != warm {
		fs.add(IDReproComparison, recFile, p+"/warmup_identical", warm, w.WarmupIdentical, "%s: the warmup verdict does not recompute", name)
	}
	n := max(len(orig.Requests), len(rerun.Requests))
	r.identical = warm && len(orig.Requests) == len(rerun.Requests)
	if len(w.Requests) != n {
		fs.add(IDReproComparison, recFile, p+"/requests", n, len(w.Requests), "%s: the record compares %d requests, the records hold %d", name, len(w.Requests), n)
	}
	var differs []string
	if !warm {
		differs = append(differs, "warmup tokens")
	}
	for j := range n {
		c := reproRecomputed{first: 0, diffs: slices.Clone(editions.ReproCounters)}
		if j < len(orig.Requests) && j < len(rerun.Requests) {
			c = recomputeRequest(&orig.Requests[j], &rerun.Requests[j])
		}
		r.identical = r.identical && c.prompt && c.tokens && c.counters
		if !c.prompt || !c.tokens || !c.counters {
			differs = append(differs, describeRequestDiff(j, c))
		}
		if j >= len(w.Requests) {
			continue
		}
		q, qp := w.Requests[j], p+ptr("requests", j)
		for _, x := range []struct {
			field       string
			want, found any
		}{
			{"prompt_identical", c.prompt, q.PromptIdentical},
			{"tokens_identical", c.tokens, q.TokensIdentical},
			{"first_token_difference", c.first, q.FirstTokenDifference},
			{"counters_identical", c.counters, q.CountersIdentical},
			{"counter_differences", strings.Join(c.diffs, ","), strings.Join(q.CounterDifferences, ",")},
			{"index", j, q.Index},
		} {
			if x.want != x.found {
				fs.add(IDReproComparison, recFile, qp+"/"+x.field, x.want, x.found,
					"%s request %d: %s does not recompute from the two raw records", name, j, x.field)
			}
		}
	}
	if w.Identical != r.identical {
		fs.add(IDReproComparison, recFile, p+"/identical", r.identical, w.Identical, "%s: the worker's verdict does not recompute", name)
	}
	if !r.identical {
		shown := differs
		if len(shown) > 3 {
			shown = append(shown[:3:3], fmt.Sprintf("%d more", len(differs)-3))
		}
		fs.add(IDReproDiffers, rp, "", nil, nil, "%s does not reproduce the edition's %s: %s", name, raw, strings.Join(shown, "; "))
	}
	return r
}

// checkRerunIdentity holds a rerun record to being a worker of the
// edition's configuration and block, under its contract, on its device,
// with timings that follow from its timestamps.
func checkRerunIdentity(v *view, rp, name string, orig, rerun *editions.RawRecord, fs *findings) bool {
	var bad []string
	if rerun.Schema != editions.SchemaRaw || !editions.RawVersionKnown(rerun.Version) {
		bad = append(bad, fmt.Sprintf("schema %q version %d", rerun.Schema, rerun.Version))
	}
	if rerun.Edition != v.e.Manifest.Edition || rerun.ConfigID != orig.ConfigID || rerun.Block != orig.Block {
		bad = append(bad, fmt.Sprintf("it is edition %s %s", rerun.Edition, editions.ReproWorkerName(rerun.ConfigID, rerun.Block)))
	}
	if rerun.Contract != orig.Contract {
		bad = append(bad, fmt.Sprintf("it ran contract %s %s, the edition %s %s", rerun.Contract.ID, rerun.Contract.SHA256, orig.Contract.ID, orig.Contract.SHA256))
	}
	if rerun.Environment.Device != orig.Environment.Device {
		bad = append(bad, fmt.Sprintf("it ran on %s, the edition on %s", rerun.Environment.Device, orig.Environment.Device))
	}
	s, o := rerun.Setup, orig.Setup
	if s.Capacity != o.Capacity || s.Executor != o.Executor || s.Placement != o.Placement || s.Policy != o.Policy {
		bad = append(bad, fmt.Sprintf("it ran capacity %d %s %s %s, the edition %d %s %s %s", s.Capacity, s.Executor, s.Placement, s.Policy,
			o.Capacity, o.Executor, o.Placement, o.Policy))
	}
	if s.Prefill != "" && o.Prefill != "" && s.Prefill != o.Prefill {
		bad = append(bad, fmt.Sprintf("it prefilled %s, the edition %s", s.Prefill, o.Prefill))
	}
	if !rerun.Warmup.Excluded {
		bad = append(bad, "its warmup is not excluded")
	}
	for j, q := range rerun.Requests {
		ns := q.TokenNs
		if len(ns) == 0 || q.N != len(q.TokenIDs) || q.N != len(ns) {
			bad = append(bad, fmt.Sprintf("request %d has N %d, %d tokens, %d timestamps", j, q.N, len(q.TokenIDs), len(ns)))
			break
		}
		if q.DecodeSeconds != float64(ns[len(ns)-1]-ns[0])/1e9 || q.RuntimeSeconds != float64(ns[len(ns)-1])/1e9 ||
			q.TTFTSeconds != float64(ns[0])/1e9 || !slices.IsSorted(ns) || ns[0] < 0 {
			bad = append(bad, fmt.Sprintf("request %d: its timings are not its timestamps'", j))
			break
		}
	}
	if len(bad) > 0 {
		fs.add(IDReproRerun, rp, "", nil, nil, "%s: the rerun record is not a worker of this edition's: %s", name, strings.Join(bad, "; "))
		return false
	}
	return true
}

// recomputeRequest compares two requests: the verifier's own
// implementation of the comparison reproduce records.
func recomputeRequest(a, b *editions.Request) reproRecomputed {
	c := reproRecomputed{first: -1, diffs: []string{}}
	c.prompt = a.PromptID == b.PromptID && slices.Equal(a.PromptTokenIDs, b.PromptTokenIDs)
	for k := 0; k < len(a.TokenIDs) || k < len(b.TokenIDs); k++ {
		if k >= len(a.TokenIDs) || k >= len(b.TokenIDs) || a.TokenIDs[k] != b.TokenIDs[k] {
			c.first = k
			break
		}
	}
	c.tokens = c.first == -1
	x, y := a.Cache, b.Cache
	for _, name := range editions.ReproCounters {
		var same bool
		switch name {
		case "hits":
			same = x.Hits == y.Hits
		case "misses":
			same = x.Misses == y.Misses
		case "evictions":
			same = x.Evictions == y.Evictions
		case "h2d_bytes":
			same = x.H2DBytes == y.H2DBytes
		case "h2d_copies":
			same = x.H2DCopies == y.H2DCopies
		case "layer_misses":
			same = slices.Equal(x.LayerMisses, y.LayerMisses)
		case "prefetch":
			same = reflect.DeepEqual(x.Prefetch, y.Prefetch)
		}
		if !same {
			c.diffs = append(c.diffs, name)
		}
	}
	c.counters = len(c.diffs) == 0
	return c
}

func describeRequestDiff(j int, c reproRecomputed) string {
	var parts []string
	if !c.prompt {
		parts = append(parts, "prompt")
	}
	if !c.tokens {
		parts = append(parts, fmt.Sprintf("tokens from index %d", c.first))
	}
	if !c.counters {
		parts = append(parts, "counters "+strings.Join(c.diffs, ", "))
	}
	return fmt.Sprintf("request %d differs in %s", j, strings.Join(parts, ", "))
}

// checkReproStrays reports files under original/ and rerun/ that the
// record does not list: a reproduction keeps exactly what it compared.
func checkReproStrays(dir string, listed map[string]bool, at func(string) string, fs *findings) {
	for _, sub := range []string{editions.ReproOriginalDir, editions.ReproRerunDir} {
		root := filepath.Join(dir, sub)
		filepath.WalkDir(root, func(p string, d iofs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			rel, err := filepath.Rel(dir, p)
			if err == nil && !listed[filepath.ToSlash(rel)] {
				fs.add(IDReproRecord, at(filepath.ToSlash(rel)), "", nil, nil, "a file the reproduction record does not list")
			}
			return nil
		})
	}
}

// reproConfig is one rerun configuration, recomputed.
type reproConfig struct {
	id        string
	runs      []*reproRun // by block
	usable    bool        // every run has a usable rerun record
	identical bool
	orig      metrics // over the rerun blocks of the edition's records
	rerun     metrics
	// Per declared prompt (contracts with a prompt rule), over the same
	// blocks: the prefill by length and the decode by depth.
	prompts                   []string // the prompts the configuration ran, contract order
	origPrefill, rerunPrefill map[string]prefillLength
	origDepth, rerunDepth     map[string]decodeDepth
}

// checkReproConfigs recomputes each configuration's speed comparison and
// holds the record's summaries to it.
func checkReproConfigs(v *view, recFile string, d *editions.ReproductionDoc, runs []*reproRun, fs *findings) map[string]*reproConfig {
	out := map[string]*reproConfig{}
	var order []string
	for _, r := range runs {
		c := out[r.config]
		if c == nil {
			c = &reproConfig{id: r.config, usable: true, identical: true}
			out[r.config] = c
			order = append(order, r.config)
		}
		c.runs = append(c.runs, r)
		c.usable = c.usable && r.rerun != nil
		c.identical = c.identical && r.identical
	}
	for _, id := range order {
		c := out[id]
		sort.Slice(c.runs, func(i, j int) bool { return c.runs[i].block < c.runs[j].block })
		if c.usable {
			var ow, rw []*worker
			for _, r := range c.runs {
				ow = append(ow, &worker{block: r.block, rec: r.orig})
				rw = append(rw, &worker{block: r.block, rec: r.rerun})
			}
			c.orig, c.rerun = computeMetrics(ow), computeMetrics(rw)
			c.recomputePrompts(v, ow, rw)
		}
	}
	summarised := map[string]bool{}
	for j, s := range d.Configurations {
		p := ptr("configurations", j)
		c := out[s.ConfigID]
		if c == nil || summarised[s.ConfigID] {
			fs.add(IDReproRecord, recFile, p, nil, s.ConfigID, "configuration %s is summarised twice or has no usable rerun worker listed", s.ConfigID)
			continue
		}
		summarised[s.ConfigID] = true
		var blocks []int
		for _, r := range c.runs {
			blocks = append(blocks, r.block)
		}
		if !slices.Equal(blocks, s.Blocks) {
			fs.add(IDReproRecord, recFile, p+"/blocks", fmt.Sprint(blocks), fmt.Sprint(s.Blocks), "%s: the summary's blocks are not its rerun workers'", s.ConfigID)
		}
		if s.Identical != c.identical {
			fs.add(IDReproComparison, recFile, p+"/identical", c.identical, s.Identical, "%s: the configuration's verdict does not recompute", s.ConfigID)
		}
		if !c.usable {
			continue
		}
		op, rp := pooledOrZero(c.orig), pooledOrZero(c.rerun)
		ratio := 0.0
		if op > 0 {
			ratio = rp / op
		}
		within := ratio >= 1-d.SpeedTolerance && ratio <= 1+d.SpeedTolerance
		for _, x := range []struct {
			field       string
			want, found any
		}{
			{"original_pooled_decode_tok_s", num(op), num(s.OriginalPooledDecodeTokS)},
			{"rerun_pooled_decode_tok_s", num(rp), num(s.RerunPooledDecodeTokS)},
			{"speed_ratio", num(ratio), num(s.SpeedRatio)},
			{"within_tolerance", within, s.WithinTolerance},
		} {
			if x.want != x.found {
				fs.add(IDReproComparison, recFile, p+"/"+x.field, x.want, x.found,
					"%s: %s does not recompute from the two raw record sets (sum(N-1) / sum(decode seconds) over blocks %v)", s.ConfigID, x.field, blocks)
			}
		}
	}
	for j, s := range d.Configurations {
		if c := out[s.ConfigID]; c != nil && c.usable {
			checkReproPrompts(v, recFile, ptr("configurations", j), d.SpeedTolerance, s, c, fs)
		}
	}
	for _, id := range order {
		if !summarised[id] {
			fs.add(IDReproRecord, recFile, "/configurations", id, nil, "configuration %s has rerun workers but no summary", id)
		}
	}
	return out
}

// recomputePrompts recomputes, under a contract with declared prompt
// lengths, each prompt's prefill rates and (with a decode interval) its
// decode at depth over the rerun blocks of both record sets, with the
// recompute check's own code (recomputePrefillLength,
// recomputeDecodeDepth).
func (c *reproConfig) recomputePrompts(v *view, ow, rw []*worker) {
	t := v.terms
	if !t.declaredLengths() {
		return
	}
	o, r := &configView{id: c.id, workers: ow}, &configView{id: c.id, workers: rw}
	c.origPrefill, c.rerunPrefill = map[string]prefillLength{}, map[string]prefillLength{}
	if t.decodeByPrompt() {
		c.origDepth, c.rerunDepth = map[string]decodeDepth{}, map[string]decodeDepth{}
	}
	for _, ki := range t.runs(configPositions(o)) {
		id := t.Prompts[ki]
		c.prompts = append(c.prompts, id)
		c.origPrefill[id], c.rerunPrefill[id] = recomputePrefillLength(o, id), recomputePrefillLength(r, id)
		if c.origDepth != nil {
			c.origDepth[id], c.rerunDepth[id] = recomputeDecodeDepth(o, id), recomputeDecodeDepth(r, id)
		}
	}
}

// Per-prompt members a reproduction compares, by their name in a
// prefill_lengths or decode_depths entry of configs/<id>.json: timed ones
// by ratio against the tolerance, counted ones exactly (through identical
// tokens and prompts).
var (
	reproPrefillTimed = map[string]func(p prefillLength) editions.Obs[float64]{
		"mean_tok_s":   func(p prefillLength) editions.Obs[float64] { return p.mean },
		"median_tok_s": func(p prefillLength) editions.Obs[float64] { return p.median },
	}
	reproDepthTimed = map[string]func(d decodeDepth) editions.Obs[float64]{
		"pooled_tok_s": func(d decodeDepth) editions.Obs[float64] { return d.pooled },
		"mean_tok_s":   func(d decodeDepth) editions.Obs[float64] { return d.mean },
		"median_tok_s": func(d decodeDepth) editions.Obs[float64] { return d.median },
		"tpot_s":       func(d decodeDepth) editions.Obs[float64] { return d.tpot },
		"decode_seconds": func(d decodeDepth) editions.Obs[float64] {
			if !(d.seconds > 0) {
				return editions.UnknownObs[float64]()
			}
			return editions.Observed(d.seconds)
		},
	}
	reproPrefillCounted = []string{"requests", "prompt_tokens"}
	reproDepthCounted   = []string{"requests", "depth_tokens", "decode_tokens"}
)

// reproRatio is the verifier's own ratio and verdict of a per-prompt
// comparison: rerun / original when both were observed and the original
// is positive (else UNKNOWN, never within).
func reproRatio(o, r editions.Obs[float64], tol float64) (editions.Obs[float64], bool) {
	if !o.Ok() || !r.Ok() || !(o.Value > 0) {
		return editions.UnknownObs[float64](), false
	}
	ratio := r.Value / o.Value
	return editions.Observed(ratio), ratio >= 1-tol && ratio <= 1+tol
}

// checkReproPrompts holds a configuration summary's per-prompt comparisons
// (prefill_lengths, decode_depths) to their recomputation: present exactly
// under a contract with declared prompt lengths (with a decode interval
// for decode_depths), one entry per prompt the configuration ran, in
// contract order, each with the members editions.ReproPrefillMetrics or
// ReproDepthMetrics name, every value exact.
func checkReproPrompts(v *view, recFile, p string, tol float64, s editions.ReproConfig, c *reproConfig, fs *findings) {
	type side struct {
		o, r editions.Obs[float64]
	}
	groups := []struct {
		member  string
		got     []editions.ReproPrompt
		want    []string // prompt ids, contract order; nil: absent
		metrics []string
		value   func(id, metric string) side
	}{
		{"prefill_lengths", s.PrefillLengths, nil, editions.ReproPrefillMetrics, func(id, m string) side {
			f := reproPrefillTimed[m]
			return side{f(c.origPrefill[id]), f(c.rerunPrefill[id])}
		}},
		{"decode_depths", s.DecodeDepths, nil, editions.ReproDepthMetrics, func(id, m string) side {
			f := reproDepthTimed[m]
			return side{f(c.origDepth[id]), f(c.rerunDepth[id])}
		}},
	}
	t := v.terms
	declared := map[string]int{}
	if t != nil {
		for i, id := range t.Prompts {
			if i < len(t.PromptTokens) {
				declared[id] = t.PromptTokens[i]
			}
		}
	}
	if c.origPrefill != nil {
		groups[0].want = c.prompts
	}
	if c.origDepth != nil {
		groups[1].want = c.prompts
	}
	for _, g := range groups {
		gp := p + "/" + g.member
		if len(g.got) != len(g.want) {
			fs.add(IDReproComparison, recFile, gp, len(g.want), len(g.got),
				"%s: the record compares %d prompts' %s, the contract and the records give %d", s.ConfigID, len(g.got), g.member, len(g.want))
			continue
		}
		for i, id := range g.want {
			q, qp := g.got[i], gp+"/"+itoa(i)
			if q.PromptID != id || q.PromptTokens != declared[id] {
				fs.add(IDReproComparison, recFile, qp, fmt.Sprintf("%s (%d tokens)", id, declared[id]), fmt.Sprintf("%s (%d tokens)", q.PromptID, q.PromptTokens),
					"%s: %s entry %d is not the contract's prompt at that position", s.ConfigID, g.member, i)
				continue
			}
			if len(q.Metrics) != len(g.metrics) {
				fs.add(IDReproComparison, recFile, qp+"/metrics", len(g.metrics), len(q.Metrics), "%s %s: the record compares %d metrics, not %v", s.ConfigID, id, len(q.Metrics), g.metrics)
				continue
			}
			for k, name := range g.metrics {
				m, mp := q.Metrics[k], qp+"/metrics/"+itoa(k)
				x := g.value(id, name)
				ratio, within := reproRatio(x.o, x.r, tol)
				for _, y := range []struct {
					field       string
					want, found any
				}{
					{"metric", name, m.Metric},
					{"original", obsAny(x.o), obsAny(m.Original)},
					{"rerun", obsAny(x.r), obsAny(m.Rerun)},
					{"ratio", obsAny(ratio), obsAny(m.Ratio)},
					{"within_tolerance", within, m.WithinTolerance},
				} {
					if y.want != y.found {
						fs.add(IDReproComparison, recFile, mp+"/"+y.field, y.want, y.found,
							"%s %s %s: %s does not recompute from the two raw record sets over blocks %v", s.ConfigID, g.member, id, y.field, s.Blocks)
					}
				}
			}
		}
	}
}

// obsAny is an observation as a comparable finding value: the number, or
// its status.
func obsAny(o editions.Obs[float64]) any {
	if !o.Ok() {
		return o.Status
	}
	return num(o.Value)
}

// pooledOrZero is the reproduction record's pooled decode (its format has
// a number only, 0 where the requests have no decode interval).
func pooledOrZero(m metrics) float64 {
	if m.decodeSeconds <= 0 || !m.pooledDecode.Ok() {
		return 0
	}
	return m.pooledDecode.Value
}

// obsOrZero is an observation's value, 0 when it has none: a timed claim
// whose metric is absent then compares as not reproduced (0/0), never as a
// match.
func obsOrZero(o editions.Obs[float64]) float64 {
	if !o.Ok() {
		return 0
	}
	return o.Value
}

// Claim metrics the reproduction compares, by configs/<id>.json pointer.
var (
	reproTimed = map[string]func(m metrics) float64{
		"/metrics/pooled_decode_tok_s":  func(m metrics) float64 { return obsOrZero(m.pooledDecode) },
		"/metrics/overall_output_tok_s": func(m metrics) float64 { return m.overallOutput },
		"/metrics/ttft_mean_s":          func(m metrics) float64 { return m.ttftMean },
		"/metrics/response_mean_s":      func(m metrics) float64 { return m.responseMean },
		"/metrics/prefill/tok_s": func(m metrics) float64 {
			if m.prefill == nil || !m.prefill.TokS.Ok() {
				return 0
			}
			return m.prefill.TokS.Value
		},
		"/metrics/decode_seconds":                func(m metrics) float64 { return m.decodeSeconds },
		"/metrics/runtime_seconds":               func(m metrics) float64 { return m.runtimeSeconds },
		"/metrics/block_spread_decode_tok_s/min": func(m metrics) float64 { return obsOrZero(m.spreadMin) },
		"/metrics/block_spread_decode_tok_s/max": func(m metrics) float64 { return obsOrZero(m.spreadMax) },
	}
	// reproCounted are the exact counts: reproduced when the counters and
	// tokens are identical.
	reproCounted = []string{"/metrics/h2d_bytes", "/metrics/hits", "/metrics/misses", "/metrics/decode_tokens",
		"/metrics/output_tokens", "/requests", "/blocks"}
	reproPeaks = map[string]func(m metrics) editions.Obs[int64]{
		"/metrics/rss_peak_bytes":          func(m metrics) editions.Obs[int64] { return m.rssPeak },
		"/metrics/vram_peak_bytes":         func(m metrics) editions.Obs[int64] { return m.vramPeak },
		"/metrics/vram_process_peak_bytes": func(m metrics) editions.Obs[int64] { return m.vramProcessPeak },
	}
)

// reproClaims gives each claim its verdict.
func reproClaims(v *view, tol float64, byConfig map[string]*reproConfig, fs *findings) {
	claimed := map[string]bool{}
	var claims []editions.Claim
	if v.e.claims != nil {
		claims = v.e.claims.Claims
	}
	for i, cl := range claims {
		p := ptr("claims", i)
		id, ok := parseConfigPath(cl.Source.File)
		c := byConfig[id]
		switch {
		case !ok:
			fs.add(IDReproClaimUnchecked, editions.ClaimsFile, p, nil, nil, "claim %s: its source %s is not a configuration document; the reproduction does not compare it", cl.ID, cl.Source.File)
			continue
		case c == nil:
			fs.add(IDReproClaimNotRerun, editions.ClaimsFile, p, nil, nil, "claim %s: configuration %s was not rerun", cl.ID, id)
			continue
		}
		claimed[id] = true
		blocks := reproBlocks(c, v)
		if !c.usable || !c.identical {
			fs.add(IDReproClaimNotReproduced, editions.ClaimsFile, p, "identical tokens, prompts and counters", "differences",
				"claim %s: NOT reproduced: configuration %s's rerun (%s) does not reproduce its tokens, prompts or cache counters (see reproduction.worker-differs and reproduction.rerun-record)", cl.ID, id, blocks)
			continue
		}
		if f, ok := reproTimed[cl.Source.Pointer]; ok {
			reproTimedVerdict(fs, p, cl.ID, blocks, strings.TrimPrefix(cl.Source.Pointer, "/metrics/"), f(c.orig), f(c.rerun), tol)
			continue
		}
		if pv, ok := reproPromptClaim(v, c, cl.Source.Pointer); ok {
			name := fmt.Sprintf("%s of %s", pv.member, pv.prompt)
			switch {
			case pv.counted:
				fs.add(IDReproClaimReproduced, editions.ClaimsFile, p, nil, nil,
					"claim %s: reproduced: the counts behind it (%s) are identical on %s", cl.ID, name, blocks)
			default:
				reproTimedVerdict(fs, p, cl.ID, blocks, name, obsOrZero(pv.o), obsOrZero(pv.r), tol)
			}
			continue
		}
		if slices.Contains(reproCounted, cl.Source.Pointer) {
			fs.add(IDReproClaimReproduced, editions.ClaimsFile, p, nil, nil,
				"claim %s: reproduced: the counts behind it (%s) are identical on %s", cl.ID, strings.TrimPrefix(cl.Source.Pointer, "/metrics/"), blocks)
			continue
		}
		if f, ok := reproPeaks[cl.Source.Pointer]; ok {
			o, r := f(c.orig), f(c.rerun)
			if !o.Ok() || !r.Ok() || o.Value <= 0 {
				fs.add(IDReproPeakOutside, editions.ClaimsFile, p, nil, nil, "claim %s: %s was not observed in both runs (edition %v, rerun %v); not compared",
					cl.ID, strings.TrimPrefix(cl.Source.Pointer, "/metrics/"), obsValue(o), obsValue(r))
				continue
			}
			ratio := float64(r.Value) / float64(o.Value)
			if ratio >= 1-tol && ratio <= 1+tol {
				fs.add(IDReproClaimReproduced, editions.ClaimsFile, p, nil, num(ratio), "claim %s: reproduced: tokens and counters identical on %s; %s %d vs %d, ratio %.4f within ±%g",
					cl.ID, blocks, strings.TrimPrefix(cl.Source.Pointer, "/metrics/"), r.Value, o.Value, ratio, tol)
			} else {
				fs.add(IDReproPeakOutside, editions.ClaimsFile, p, fmt.Sprintf("ratio in [%g, %g]", 1-tol, 1+tol), num(ratio),
					"claim %s: tokens and counters identical on %s, but the rerun's %s is %d against the edition's %d: ratio %.4f, outside ±%g (reported, not enforced)",
					cl.ID, blocks, strings.TrimPrefix(cl.Source.Pointer, "/metrics/"), r.Value, o.Value, ratio, tol)
			}
			continue
		}
		fs.add(IDReproClaimUnchecked, editions.ClaimsFile, p, nil, nil, "claim %s: its source %s#%s is not a metric the reproduction compares", cl.ID, cl.Source.File, cl.Source.Pointer)
	}
	var ids []string
	for id := range byConfig {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if !claimed[id] {
			fs.add(IDReproNoClaims, editions.ClaimsFile, "", nil, id, "configuration %s was rerun, but the edition has no claims about it", id)
		}
	}
}

// reproTimedVerdict is a timed claim's verdict from the edition's value o
// and the rerun's r over the rerun blocks: reproduced when o > 0 and r / o
// is within the tolerance, else the speed-outside hint (reported, not
// enforced; an unobserved value is 0, so 0/0 is never a match).
func reproTimedVerdict(fs *findings, p, claimID, blocks, name string, o, r, tol float64) {
	ratio := r / o
	if o > 0 && ratio >= 1-tol && ratio <= 1+tol {
		fs.add(IDReproClaimReproduced, editions.ClaimsFile, p, nil, num(ratio),
			"claim %s: reproduced: tokens and counters identical on %s; %s %s there vs the edition's %s there, ratio %.4f within ±%g", claimID, blocks,
			name, fmtFloat(r), fmtFloat(o), ratio, tol)
		return
	}
	fs.add(IDReproSpeedOutside, editions.ClaimsFile, p, fmt.Sprintf("ratio in [%g, %g]", 1-tol, 1+tol), num(ratio),
		"claim %s: tokens and counters identical on %s, but the rerun's %s is %s against the edition's %s there: ratio %.4f, outside ±%g (reported, not enforced)", claimID, blocks,
		name, fmtFloat(r), fmtFloat(o), ratio, tol)
}

// reproPromptValue is a per-prompt claim's source as the reproduction
// compares it.
type reproPromptValue struct {
	prompt, member string
	counted        bool
	o, r           editions.Obs[float64] // timed members only
}

// reproPromptClaim resolves a claim source /metrics/prefill_lengths/<i>/<member>
// or /metrics/decode_depths/<i>/<member> of a rerun configuration: entry i
// of the edition's configs/<id>.json names the prompt, whose metrics were
// recomputed over the rerun blocks (recomputePrompts). false when the
// pointer is no such member, or the configuration has no such entry or
// recomputation.
func reproPromptClaim(v *view, c *reproConfig, pointer string) (reproPromptValue, bool) {
	var out reproPromptValue
	parts := strings.Split(strings.TrimPrefix(pointer, "/metrics/"), "/")
	if len(parts) != 3 || !strings.HasPrefix(pointer, "/metrics/") {
		return out, false
	}
	i, err := strconv.Atoi(parts[1])
	cv := v.byID[c.id]
	if err != nil || i < 0 || cv == nil || cv.doc == nil {
		return out, false
	}
	out.member = parts[2]
	switch m := cv.doc.Metrics; parts[0] {
	case "prefill_lengths":
		if i >= len(m.PrefillLengths) || c.origPrefill == nil {
			return out, false
		}
		out.prompt = m.PrefillLengths[i].PromptID
		o, ok1 := c.origPrefill[out.prompt]
		r, ok2 := c.rerunPrefill[out.prompt]
		if f, ok := reproPrefillTimed[out.member]; ok && ok1 && ok2 {
			out.o, out.r = f(o), f(r)
			return out, true
		}
		out.counted = ok1 && ok2 && slices.Contains(reproPrefillCounted, out.member)
		return out, out.counted
	case "decode_depths":
		if i >= len(m.DecodeDepths) || c.origDepth == nil {
			return out, false
		}
		out.prompt = m.DecodeDepths[i].PromptID
		o, ok1 := c.origDepth[out.prompt]
		r, ok2 := c.rerunDepth[out.prompt]
		if f, ok := reproDepthTimed[out.member]; ok && ok1 && ok2 {
			out.o, out.r = f(o), f(r)
			return out, true
		}
		out.counted = ok1 && ok2 && slices.Contains(reproDepthCounted, out.member)
		return out, out.counted
	}
	return out, false
}

// reproBlocks says which blocks were rerun: "block 1 of 3".
func reproBlocks(c *reproConfig, v *view) string {
	var bs []string
	for _, r := range c.runs {
		bs = append(bs, itoa(r.block))
	}
	of := ""
	if cv := v.byID[c.id]; cv != nil {
		of = fmt.Sprintf(" of %d", len(cv.rawPaths))
	}
	word := "block "
	if len(bs) > 1 {
		word = "blocks "
	}
	return word + strings.Join(bs, ", ") + of
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
