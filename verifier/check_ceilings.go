package verifier

import (
	"html"
	"strings"

	"github.com/horizon-runmap/horizon/ceilings"
	"github.com/horizon-runmap/horizon/editions"
)

// The ceilings section of a cuda edition's reports ("Speeds beside their
// ceilings": HBM bytes a step against the bandwidth, missed bytes against
// the measured H2D rate, VRAM against weights + KV + allowance, decode by
// depth and prefill against theirs) is derived text like the tables, so
// check derived recomputes it. The runner writes package ceilings'
// Section of the edition's raw records into every report of a cuda
// campaign (cpu editions have none); the verifier computes the same from
// the records it verifies and compares the text exactly, with each format
// a runner has written (ceilings.SectionVersions: today's, and the VRAM
// table of editions published before the limit was judged on the
// process's reading), each recomputed from the raw records. A cuda report
// without the section is an error too: taking it out would hide a VRAM
// limit missed or a small share of the HBM ceiling. Where the section
// cannot be recomputed (an architecture without a synthetic preset's
// shapes) its numbers are unverified, a hint.
var (
	IDDerivedCeilings           = def("derived", "derived.ceilings", Error, "a report's ceilings section differs from package ceilings' section recomputed from the edition's raw records, or a cuda campaign's report has none")
	IDDerivedCeilingsUnverified = def("derived", "derived.ceilings-unverified", Hint, "a report's ceilings section cannot be recomputed from the edition's raw records: its numbers are unverified")
	IDDerivedCeilingsUnrated    = def("derived", "derived.ceilings-unrated", Hint, "a cuda configuration's records name another GPU than the one the ceilings' figures belong to (or several GPUs): its shares of the ceilings are UNKNOWN")
)

// checkUnratedCeilings names each cuda configuration that the ceilings'
// figures (ceilings.DefaultOptions: one GPU's) do not rate. Its shares of
// the HBM, H2D and arithmetic ceilings are UNKNOWN in the section, which is
// true of another GPU, but also what a forger gets by renaming the GPU in
// every record of a configuration whose share would look poor: the hint
// makes an unrated configuration visible either way.
func checkUnratedCeilings(device string, rc *ceilingsRecompute, fs *findings) {
	if device != "cuda" {
		return
	}
	confs, err := rc.load()
	if err != nil {
		return // the ceilings section's own check reports it
	}
	o := ceilings.DefaultOptions()
	for _, c := range confs {
		if c.Device != "cuda" || o.Rated(c) {
			continue
		}
		got := c.GPU
		if got == "" {
			got = "several GPUs, or none"
		}
		fs.add(IDDerivedCeilingsUnrated, "raw/"+c.ID, "/environment/gpu", o.GPU, got,
			"configuration %s's records name %s, not the %s whose figures the ceilings section uses: its shares of the ceilings are %s",
			c.ID, got, o.GPU, editions.Unknown)
	}
}

// ceilingsHeading is the section's heading text in both report formats.
const ceilingsHeading = "Speeds beside their ceilings"

// reportCeilings returns the ceilings section of a report as its Markdown
// text (report.html holds it escaped in the <pre> after the heading), and
// whether the report has one.
func reportCeilings(file, text string) (string, bool) {
	if strings.HasSuffix(file, ".html") {
		_, rest, ok := strings.Cut(text, "<h2>"+ceilingsHeading+"</h2>")
		if !ok {
			return "", false
		}
		_, rest, ok = strings.Cut(rest, "<pre>")
		if !ok {
			return "", true
		}
		body, _, ok := strings.Cut(rest, "</pre>")
		if !ok {
			return "", true
		}
		return html.UnescapeString(body), true
	}
	_, rest, ok := strings.Cut(text, "\n## "+ceilingsHeading+"\n\n")
	if !ok {
		return "", false
	}
	// The section ends where the next level-2 heading starts (its own
	// headings are level 3).
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	return rest, true
}

// ceilingsRecompute computes the edition's ceilings section and HBM
// ceilings once, from the raw records under dir.
type ceilingsRecompute struct {
	dir                   string
	loaded, done, hbmDone bool
	confs                 []*ceilings.Config
	loadErr               error
	texts                 []string // today's format first
	err                   error
	hbmCeil               map[string]float64
	hbmComputed           bool
}

// load reads the raw records once for both uses.
func (c *ceilingsRecompute) load() ([]*ceilings.Config, error) {
	if !c.loaded {
		c.confs, c.loadErr = ceilings.LoadEdition(c.dir)
		c.loaded = true
	}
	return c.confs, c.loadErr
}

func (c *ceilingsRecompute) get() ([]string, error) {
	if !c.done {
		if confs, err := c.load(); err != nil {
			c.err = err
		} else {
			c.texts, c.err = ceilings.SectionVersionsOf(confs)
		}
		c.done = true
	}
	return c.texts, c.err
}

// hbm is each cuda configuration's HBM decode ceiling in tok/s, as the
// runner's headline sentences state it (ceilings.HBMCeilings with the
// default options); ok is false when the raw records cannot be loaded
// for it.
func (c *ceilingsRecompute) hbm() (map[string]float64, bool) {
	if !c.hbmDone {
		if confs, err := c.load(); err == nil {
			c.hbmCeil, c.hbmComputed = ceilings.HBMCeilings(confs, ceilings.DefaultOptions()), true
		}
		c.hbmDone = true
	}
	return c.hbmCeil, c.hbmComputed
}

// checkReportCeilings compares a report's ceilings section with the
// recomputed one, and names the first line that differs; a cuda
// campaign's report (device, the campaign's /campaign/device) must have
// one.
func checkReportCeilings(rf reportFormat, text, device string, rc *ceilingsRecompute, fs *findings) {
	got, ok := reportCeilings(rf.file, text)
	if !ok {
		if device == "cuda" {
			fs.add(IDDerivedCeilings, rf.file, "", "a section \""+ceilingsHeading+"\"", "none",
				"%s has no ceilings section, which the runner writes into every report of a cuda campaign", rf.file)
		}
		return
	}
	versions, err := rc.get()
	if err != nil {
		fs.add(IDDerivedCeilingsUnverified, rf.file, "", "a recomputable section", err.Error(),
			"%s's ceilings section cannot be recomputed: %v", rf.file, err)
		return
	}
	for _, v := range versions {
		if got == v {
			return
		}
	}
	if i, g, w, ok := firstDifference(strings.Split(got, "\n"), strings.Split(versions[0], "\n")); ok {
		fs.add(IDDerivedCeilings, rf.file, "", w, g,
			"%s's ceilings section differs from the one recomputed from the raw records at its line %d", rf.file, i+1)
	}
}

// firstDifference is the first index at which got and want differ, with
// both items there ("(none)" past an end); ok is false when they are equal.
func firstDifference(got, want []string) (i int, g, w string, ok bool) {
	for i = 0; i < max(len(got), len(want)); i++ {
		g, w = "(none)", "(none)"
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			return i, g, w, true
		}
	}
	return 0, "", "", false
}
