package verifier

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/horizon-runmap/horizon/editions"
)

// Check derived: the files a reader actually reads (report.md,
// report.html, the plots) say what the JSON says. The JSON is recomputed
// from raw by the checks before; without this one, a forger leaves the
// JSON honest and edits the numbers people look at.
//
// Both reports are required, and so is every plot report.md shows. The
// results table (in report.html the speed and resources tables under the
// Results heading, joined on their configuration column) and the
// cache-invariants table of each report are parsed
// and every cell is compared with configs/<id>.json, formatted the way its
// column says (derivedColumns, the verifier's own copy of the runner's
// field list: header -> JSON pointer, scale, decimals). So are the contract
// line's id and hash and the claim count, report.html's headline
// sentences (check_headlines.go) and a cuda report's ceilings section
// (check_ceilings.go), both recomputed from the raw records. Weak spots,
// admitted: a column the verifier does not know is reported unverified (a
// hint), not checked; other prose (caveats, definitions) is not checked;
// the ceilings are recomputed with the runner's own package ceilings (a
// bug both share agrees with itself); and a plot is checked only for being
// present and a PNG: its pixels are not compared with the data.
var (
	IDDerivedReportMissing = def("derived", "derived.report-missing", Error, "report.md or report.html is absent (or not a regular file)")
	IDDerivedTableMissing  = def("derived", "derived.table-missing", Error, "a report lacks its results table or its cache-invariants table, or the table cannot be parsed")
	IDDerivedRow           = def("derived", "derived.table-row", Error, "a report table's rows are not exactly the edition's configurations (a row for an unknown configuration, a configuration without a row, a row of the wrong width)")
	IDDerivedCell          = def("derived", "derived.cell", Error, "a report table cell differs from its configuration document formatted as its column says")
	IDDerivedColumn        = def("derived", "derived.unverified-column", Hint, "a report table has a column the verifier does not know: its cells are unverified")
	IDDerivedContractLine  = def("derived", "derived.contract-line", Error, "a report's contract line names another contract id or hash than contract.json, or is missing")
	IDDerivedClaimCount    = def("derived", "derived.claim-count", Error, "a report's claim count differs from the number of claims in claims.json, or is missing")
	IDDerivedPlotMissing   = def("derived", "derived.plot-missing", Error, "a plot a report shows is absent from the edition")
	IDDerivedPlotNotPNG    = def("derived", "derived.plot-not-png", Error, "a plot a report shows is not a PNG file (only presence and the PNG signature are checked)")
)

// derivedColumn formats one report column from a configuration document
// (its generic tree). An error means the document lacks the member.
type derivedColumn func(d any) (string, error)

// numberCol formats the number at p times mul divided by div with
// decimals places ("%.*f"); an observation that is a status (UNKNOWN,
// UNSUPPORTED) is shown as the status. The order of the operations is the
// runner's (milliseconds are seconds * 1e3, MiB are bytes / 2^20), so the
// float64 rounding is the same.
func numberCol(p string, mul, div float64, decimals int) derivedColumn {
	return func(d any) (string, error) {
		f, status, err := numberAt(d, p)
		if err != nil || status != "" {
			return status, err
		}
		if mul != 1 {
			f *= mul
		}
		if div != 1 {
			f /= div
		}
		return strconv.FormatFloat(f, 'f', decimals, 64), nil
	}
}

// intCol formats the integer at p ("%d"), or its status.
func intCol(p string) derivedColumn {
	return func(d any) (string, error) {
		x, err := resolve(d, p)
		if err != nil {
			return "", err
		}
		switch v := x.(type) {
		case json.Number:
			i, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				return "", fmt.Errorf("%s: %w", p, err)
			}
			return strconv.FormatInt(i, 10), nil
		case string:
			return v, nil
		}
		return "", fmt.Errorf("%s is not a number", p)
	}
}

func strCol(p string) derivedColumn {
	return func(d any) (string, error) {
		x, err := resolve(d, p)
		if err != nil {
			return "", err
		}
		s, ok := x.(string)
		if !ok {
			return "", fmt.Errorf("%s is not a string", p)
		}
		return s, nil
	}
}

// numberAt reads a number at p, or the status string an observation holds
// instead.
func numberAt(d any, p string) (float64, string, error) {
	x, err := resolve(d, p)
	if err != nil {
		return 0, "", err
	}
	switch v := x.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		return f, "", err
	case string:
		if v == editions.Unknown || v == editions.Unsupported {
			return 0, v, nil
		}
	}
	return 0, "", fmt.Errorf("%s is not a number", p)
}

// joinCols formats several columns into one cell with format.
func joinCols(format string, cols ...derivedColumn) derivedColumn {
	return func(d any) (string, error) {
		args := make([]any, len(cols))
		for i, c := range cols {
			s, err := c(d)
			if err != nil {
				return "", err
			}
			args[i] = s
		}
		return fmt.Sprintf(format, args...), nil
	}
}

const (
	mebi = 1 << 20
	gibi = 1 << 30
)

// resultColumns and invariantColumns are the report tables' columns by
// header (campaigns/report/fields.go writes them; this is the verifier's own copy).
var resultColumns = map[string]derivedColumn{
	"configuration": strCol("/id"),
	"checkpoint": func(d any) (string, error) {
		var k editions.Checkpoint
		if err := decodeAt(d, "/checkpoint", &k); err != nil {
			return "", err
		}
		return editions.CheckpointLabel(k), nil
	},
	"executor": func(d any) (string, error) {
		ex, err := strCol("/executor")(d)
		if err != nil {
			return "", err
		}
		seed, _ := strCol("/seed_executor")(d)
		if seed != "" {
			return fmt.Sprintf("%s (seed: %s)", ex, seed), nil
		}
		return ex, nil
	},
	"capacity (experts/layer)": joinCols("%s/%s", intCol("/capacity"), intCol("/experts_per_layer")),
	"regime":                   strCol("/regime"),
	"policy":                   strCol("/policy"),
	// Shown where every configuration records artifact.kv_dtype.
	"KV cache": func(d any) (string, error) {
		if _, err := resolve(d, "/artifact"); err != nil {
			return "", err
		}
		if _, err := resolve(d, "/artifact/kv_dtype"); err != nil {
			return editions.KVFP32, nil
		}
		return strCol("/artifact/kv_dtype")(d)
	},
	// Shown where some configuration records
	// artifact.expert_activation_dtype (workers record FP16 only).
	"expert activations": func(d any) (string, error) {
		if _, err := resolve(d, "/artifact"); err != nil {
			return "", err
		}
		if _, err := resolve(d, "/artifact/expert_activation_dtype"); err != nil {
			return editions.ExpertActFP32, nil
		}
		return strCol("/artifact/expert_activation_dtype")(d)
	},
	// Shown where some configuration records
	// artifact.dense_activation_dtype (workers record FP16 only).
	"dense activations": func(d any) (string, error) {
		if _, err := resolve(d, "/artifact"); err != nil {
			return "", err
		}
		if _, err := resolve(d, "/artifact/dense_activation_dtype"); err != nil {
			return editions.ExpertActFP32, nil
		}
		return strCol("/artifact/dense_activation_dtype")(d)
	},
	"pooled decode (tok/s)": numberCol("/metrics/pooled_decode_tok_s", 1, 1, 2),
	"block spread (tok/s)": func(d any) (string, error) {
		// No decode interval (one output token): both ends UNKNOWN, shown
		// as one UNKNOWN.
		_, lo, err1 := numberAt(d, "/metrics/block_spread_decode_tok_s/min")
		_, hi, err2 := numberAt(d, "/metrics/block_spread_decode_tok_s/max")
		if err1 == nil && err2 == nil && lo != "" && hi != "" {
			return editions.Unknown, nil
		}
		return joinCols("%s-%s", numberCol("/metrics/block_spread_decode_tok_s/min", 1, 1, 2),
			numberCol("/metrics/block_spread_decode_tok_s/max", 1, 1, 2))(d)
	},
	// The bootstrap-v1 intervals, shown when every configuration has one.
	"pooled decode 95% CI (tok/s)": joinCols("%s-%s", numberCol("/uncertainty/pooled_decode_tok_s/lo", 1, 1, 2),
		numberCol("/uncertainty/pooled_decode_tok_s/hi", 1, 1, 2)),
	"TTFT mean 95% CI (ms)": joinCols("%s-%s", numberCol("/uncertainty/ttft_mean_s/lo", 1e3, 1, 1),
		numberCol("/uncertainty/ttft_mean_s/hi", 1e3, 1, 1)),
	"overall output (tok/s)": numberCol("/metrics/overall_output_tok_s", 1, 1, 2),
	"TTFT mean (ms)":         numberCol("/metrics/ttft_mean_s", 1e3, 1, 1),
	"prefill (tok/s)":        numberCol("/metrics/prefill/tok_s", 1, 1, 1),
	"response mean (s)":      numberCol("/metrics/response_mean_s", 1, 1, 3),
	"H2D (MiB)":              numberCol("/metrics/h2d_bytes", 1, mebi, 1),
	"misses":                 intCol("/metrics/misses"),
	"RSS peak (MiB)":         numberCol("/metrics/rss_peak_bytes", 1, mebi, 1),
	"VRAM peak (GiB)":        numberCol("/metrics/vram_peak_bytes", 1, gibi, 2),
	"requests":               joinCols("%s (%s blocks)", intCol("/requests"), intCol("/blocks")),
}

var invariantColumns = map[string]derivedColumn{
	"configuration":            strCol("/id"),
	"expert D2H (bytes)":       numberCol("/invariants/d2h_expert_bytes", 1, 1, 0),
	"writebacks":               numberCol("/invariants/writebacks", 1, 1, 0),
	"authority writes":         numberCol("/invariants/authority_writes", 1, 1, 0),
	"request SHA work (bytes)": numberCol("/invariants/request_hash_bytes", 1, 1, 0),
	"request artifact reads":   numberCol("/invariants/request_artifact_reads", 1, 1, 0),
}

func decodeAt(d any, p string, out any) error {
	x, err := resolve(d, p)
	if err != nil {
		return err
	}
	b, err := json.Marshal(x)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// reportTable is a table parsed from a report.
type reportTable struct {
	headers []string
	rows    [][]string
}

// reportFormat is how one report file is read.
type reportFormat struct {
	file string
	// table returns the table under the section titled title.
	table func(text, title string) (reportTable, bool)
	// contract returns the contract line's id and hash; claims the claim
	// count. ok is false when the line is missing.
	contract func(text string) (id, sha string, ok bool)
	claims   func(text string) (int, bool)
	plots    *regexp.Regexp
}

var (
	mdContract   = regexp.MustCompile("(?m)^Contract \\*\\*([^*]+)\\*\\* \\(sha256 `([0-9a-f]*)`\\)")
	mdClaims     = regexp.MustCompile(`Claims: (\d+) in claims\.json\.`)
	mdPlot       = regexp.MustCompile(`!\[[^\]]*\]\(([^)\s]+)\)`)
	htmlContract = regexp.MustCompile(`<p>Contract <strong>([^<]+)</strong> \(sha256 <code>([0-9a-f]*)</code>\)`)
	htmlClaims   = regexp.MustCompile(`Claims: (\d+) in <a href="claims\.json">claims\.json</a>\.`)
	htmlPlot     = regexp.MustCompile(`<img src="([^"]+)"`)
	htmlTable    = regexp.MustCompile(`(?s)<table>(.*?)</table>`)
	htmlRow      = regexp.MustCompile(`(?s)<tr>(.*?)</tr>`)
	htmlCell     = regexp.MustCompile(`(?s)<t([hd])(?:\s[^>]*)?>(.*?)</t[hd]>`)
)

var reportFormats = []reportFormat{
	{file: editions.ReportMD, table: mdTable, plots: mdPlot,
		contract: func(s string) (string, string, bool) {
			m := mdContract.FindStringSubmatch(s)
			if m == nil {
				return "", "", false
			}
			return m[1], m[2], true
		},
		claims: func(s string) (int, bool) { return atoiMatch(mdClaims, s) }},
	{file: editions.ReportHTML, table: htmlTableUnder, plots: htmlPlot,
		contract: func(s string) (string, string, bool) {
			m := htmlContract.FindStringSubmatch(s)
			if m == nil {
				return "", "", false
			}
			return html.UnescapeString(m[1]), m[2], true
		},
		claims: func(s string) (int, bool) { return atoiMatch(htmlClaims, s) }},
}

func atoiMatch(re *regexp.Regexp, s string) (int, bool) {
	m := re.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	return n, err == nil
}

// The sections that hold the two tables, in both formats.
const (
	resultsTitle    = "Results"
	invariantsTitle = "Cache contract invariants"
)

// mdTable parses the first Markdown table after the "## <title>" heading
// (and before the next "## " heading).
func mdTable(text, title string) (reportTable, bool) {
	lines := strings.Split(text, "\n")
	i := 0
	for ; i < len(lines) && strings.TrimSpace(lines[i]) != "## "+title; i++ {
	}
	var rows [][]string
	for i++; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if strings.HasPrefix(l, "## ") {
			break
		}
		if strings.HasPrefix(l, "|") {
			rows = append(rows, mdCells(l))
		} else if len(rows) > 0 {
			break
		}
	}
	if len(rows) < 2 {
		return reportTable{}, false
	}
	return reportTable{headers: rows[0], rows: rows[2:]}, true
}

// mdCells splits one Markdown table row on unescaped '|' and unescapes
// "\|" (the runner's mdCell).
func mdCells(l string) []string {
	l = strings.TrimSuffix(strings.TrimPrefix(l, "|"), "|")
	var cells []string
	var b strings.Builder
	for i := 0; i < len(l); i++ {
		switch {
		case l[i] == '\\' && i+1 < len(l) && l[i+1] == '|':
			b.WriteByte('|')
			i++
		case l[i] == '|':
			cells = append(cells, strings.TrimSpace(b.String()))
			b.Reset()
		default:
			b.WriteByte(l[i])
		}
	}
	return append(cells, strings.TrimSpace(b.String()))
}

// htmlTableUnder parses the <table>s after <h2>title</h2> (and before the
// next <h2>) as one table. report.html splits its results into a speed and
// a resources table whose rows both start with the configuration (older
// editions have one table): the tables are joined row by row, the later
// ones' first column dropped. Tables whose rows do not start with the same
// cells, in the same order, are not a table (false): derived.table-missing.
func htmlTableUnder(text, title string) (reportTable, bool) {
	_, after, ok := strings.Cut(text, "<h2>"+html.EscapeString(title)+"</h2>")
	if !ok {
		return reportTable{}, false
	}
	if next := strings.Index(after, "<h2>"); next >= 0 {
		after = after[:next]
	}
	ms := htmlTable.FindAllStringSubmatch(after, -1)
	if ms == nil {
		return reportTable{}, false
	}
	var joined reportTable
	for i, m := range ms {
		t, ok := htmlTableRows(m[1])
		if !ok {
			return reportTable{}, false
		}
		if i == 0 {
			joined = t
			continue
		}
		if len(t.rows) != len(joined.rows) || len(t.headers) == 0 || len(joined.headers) == 0 || t.headers[0] != joined.headers[0] {
			return reportTable{}, false
		}
		joined.headers = append(joined.headers, t.headers[1:]...)
		for r := range t.rows {
			if len(t.rows[r]) == 0 || len(joined.rows[r]) == 0 || t.rows[r][0] != joined.rows[r][0] {
				return reportTable{}, false
			}
			joined.rows[r] = append(joined.rows[r], t.rows[r][1:]...)
		}
	}
	return joined, true
}

// htmlTableRows parses one table's rows: the first row of <th> cells is
// the header.
func htmlTableRows(body string) (reportTable, bool) {
	var t reportTable
	for _, r := range htmlRow.FindAllStringSubmatch(body, -1) {
		var cells []string
		header := false
		for _, c := range htmlCell.FindAllStringSubmatch(r[1], -1) {
			header = c[1] == "h"
			cells = append(cells, strings.TrimSpace(html.UnescapeString(c[2])))
		}
		if header && t.headers == nil {
			t.headers = cells
		} else {
			t.rows = append(t.rows, cells)
		}
	}
	return t, t.headers != nil
}

func checkDerived(v *view, fs *findings) {
	e := v.e
	rc := &ceilingsRecompute{dir: e.Dir}
	device := ""
	if cd := e.docs[editions.CampaignFile]; cd != nil && cd.tree != nil {
		device = cd.str("/campaign/device")
	}
	for _, rf := range reportFormats {
		en := e.entries[rf.file]
		if en == nil || !en.regular {
			fs.add(IDDerivedReportMissing, rf.file, "", "present", "absent", "the edition has no %s", rf.file)
			continue
		}
		b, err := readSnapshot(e, en)
		if err != nil {
			fs.add(IDDerivedReportMissing, rf.file, "", "readable", nil, "%s cannot be read as it was listed: %v", rf.file, err)
			continue
		}
		text := string(b)
		checkReportTables(v, rf, text, fs)
		checkPrefillTable(v, rf, text, fs)
		checkDepthTable(v, rf, text, fs)
		checkReportHeader(v, rf, text, fs)
		checkReportPlots(v, rf, text, fs)
		checkReportHeadlines(v, rf, text, rc, fs)
		checkReportCeilings(rf, text, device, rc, fs)
	}
	checkUnratedCeilings(device, rc, fs)
}

// readSnapshot reads a file of the edition and insists it is still the
// file the edition was read with (same SHA-256), so that every check judges
// the same bytes.
func readSnapshot(e *Edition, en *entry) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(e.Dir, filepath.FromSlash(en.path)))
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	if en.readErr == nil && hex.EncodeToString(sum[:]) != en.sha256 {
		return nil, fmt.Errorf("%s changed while the edition was being verified", en.path)
	}
	return b, nil
}

func checkReportTables(v *view, rf reportFormat, text string, fs *findings) {
	for _, tc := range []struct {
		title string
		cols  map[string]derivedColumn
	}{{resultsTitle, resultColumns}, {invariantsTitle, invariantColumns}} {
		t, ok := rf.table(text, tc.title)
		if !ok {
			fs.add(IDDerivedTableMissing, rf.file, "", tc.title+" table", nil, "%s has no %q table", rf.file, tc.title)
			continue
		}
		idCol := -1
		for j, h := range t.headers {
			if h == "configuration" {
				idCol = j
			} else if tc.cols[h] == nil {
				fs.add(IDDerivedColumn, rf.file, "", nil, h, "%s, %q table: column %q is not one the verifier knows; its cells are unverified", rf.file, tc.title, h)
			}
		}
		if idCol < 0 {
			fs.add(IDDerivedTableMissing, rf.file, "", "a configuration column", t.headers, "%s, %q table: no configuration column", rf.file, tc.title)
			continue
		}
		seen := map[string]bool{}
		for ri, row := range t.rows {
			if len(row) != len(t.headers) {
				fs.add(IDDerivedRow, rf.file, "", len(t.headers), len(row), "%s, %q table, row %d: %d cells under %d headers", rf.file, tc.title, ri+1, len(row), len(t.headers))
				continue
			}
			id := row[idCol]
			c := v.byID[id]
			d := v.e.docs[editions.ConfigPath(id)]
			if c == nil || d == nil || d.tree == nil {
				fs.add(IDDerivedRow, rf.file, "", "a configuration of the edition", id, "%s, %q table, row %d: no configuration %q", rf.file, tc.title, ri+1, id)
				continue
			}
			if seen[id] {
				fs.add(IDDerivedRow, rf.file, "", "one row per configuration", id, "%s, %q table: configuration %s has two rows", rf.file, tc.title, id)
			}
			seen[id] = true
			for j, h := range t.headers {
				col := tc.cols[h]
				if col == nil || j == idCol {
					continue
				}
				want, err := col(d.tree)
				if err != nil {
					fs.add(IDDerivedCell, rf.file, "", nil, row[j], "%s, %q table, %s, %q: the configuration document cannot give this cell: %v", rf.file, tc.title, id, h, err)
					continue
				}
				if row[j] != want {
					fs.add(IDDerivedCell, rf.file, "", want, row[j], "%s, %q table, %s, %q: the cell says %s, %s says %s",
						rf.file, tc.title, id, h, row[j], editions.ConfigPath(id), want)
				}
			}
		}
		for _, c := range v.configs {
			if c.doc != nil && !seen[c.id] {
				fs.add(IDDerivedRow, rf.file, "", c.id, nil, "%s, %q table: configuration %s has no row", rf.file, tc.title, c.id)
			}
		}
	}
}

// prefillTitle is the section of the prefill table (a row per
// configuration and prompt length), which a report has exactly when the
// contract declares prompt lengths.
const prefillTitle = "Prefill by prompt length"

// prefillColumns are the prefill table's columns by header, formatted from
// one entry of a configuration's /metrics/prefill_lengths (the verifier's
// own copy of campaigns/report's prefillLengthFields).
var prefillColumns = map[string]derivedColumn{
	"prompt":                      strCol("/prompt_id"),
	"prompt tokens":               intCol("/prompt_tokens"),
	"prefill mean (tok/s)":        numberCol("/mean_tok_s", 1, 1, 1),
	"prefill median (tok/s)":      numberCol("/median_tok_s", 1, 1, 1),
	"requests":                    intCol("/requests"),
	"prefill mean 95% CI (tok/s)": optionalInterval("/interval", 1),
}

// optionalInterval is "lo-hi" of the interval object at p, UNKNOWN where
// there is none.
func optionalInterval(p string, decimals int) derivedColumn {
	return func(d any) (string, error) {
		if _, err := resolve(d, p); err != nil {
			return editions.Unknown, nil
		}
		return joinCols("%s-%s", numberCol(p+"/lo", 1, 1, decimals), numberCol(p+"/hi", 1, 1, decimals))(d)
	}
}

// depthTitle is the section of the depth table (a row per configuration
// and context depth), which a report has exactly when the contract
// decodes per declared prompt (PERF-DEPTH-v1).
const depthTitle = "Decode by context depth"

// depthColumns are the depth table's columns by header, formatted from one
// entry of a configuration's /metrics/decode_depths (the verifier's own
// copy of campaigns/report's depthFields). "prefill mean (tok/s)" is the
// same prompt's /metrics/prefill_lengths entry (promptTable.joined).
var depthColumns = map[string]derivedColumn{
	"depth":                        strCol("/prompt_id"),
	"depth tokens":                 intCol("/depth_tokens"),
	"pooled decode (tok/s)":        numberCol("/pooled_tok_s", 1, 1, 2),
	"pooled decode 95% CI (tok/s)": optionalInterval("/interval", 2),
	"decode mean (tok/s)":          numberCol("/mean_tok_s", 1, 1, 2),
	"decode median (tok/s)":        numberCol("/median_tok_s", 1, 1, 2),
	"TPOT (ms)":                    numberCol("/tpot_s", 1e3, 1, 3),
	"requests":                     intCol("/requests"),
}

// promptTable is a report table with a row per configuration and contract
// prompt, from one member of the configuration documents' metrics.
type promptTable struct {
	title   string
	member  string // "prefill_lengths" or "decode_depths"
	key     string // the header of the prompt column
	present bool   // whether the contract gives the table
	absent  string // why it must be absent
	entries func(d *editions.ConfigDoc) []string
	columns map[string]derivedColumn
	// joined are columns read from another member's entry of the same
	// prompt (header -> member, column); a prompt without one is UNKNOWN.
	joined map[string]struct {
		member string
		col    derivedColumn
	}
}

func prefillLengthIDs(d *editions.ConfigDoc) []string {
	var out []string
	for _, pl := range d.Metrics.PrefillLengths {
		out = append(out, pl.PromptID)
	}
	return out
}

func decodeDepthIDs(d *editions.ConfigDoc) []string {
	var out []string
	for _, dd := range d.Metrics.DecodeDepths {
		out = append(out, dd.PromptID)
	}
	return out
}

// checkPrefillTable and checkDepthTable compare a report's prefill and
// depth tables with the configuration documents (checkPromptTable).
func checkPrefillTable(v *view, rf reportFormat, text string, fs *findings) {
	checkPromptTable(v, rf, text, fs, promptTable{title: prefillTitle, member: "prefill_lengths", key: "prompt",
		present: v.terms.declaredLengths(), absent: "the contract declares no prompt lengths",
		entries: prefillLengthIDs, columns: prefillColumns})
}

func checkDepthTable(v *view, rf reportFormat, text string, fs *findings) {
	checkPromptTable(v, rf, text, fs, promptTable{title: depthTitle, member: "decode_depths", key: "depth",
		present: v.terms.decodeByPrompt(), absent: "the contract does not decode per declared depth",
		entries: decodeDepthIDs, columns: depthColumns,
		joined: map[string]struct {
			member string
			col    derivedColumn
		}{"prefill mean (tok/s)": {"prefill_lengths", numberCol("/mean_tok_s", 1, 1, 1)}}})
}

// checkPromptTable compares a report's per-prompt table with the
// configuration documents: one row per (configuration, prompt entry), in
// document then contract order, every cell formatted as its column says.
// Where the contract does not give the table it must be absent.
func checkPromptTable(v *view, rf reportFormat, text string, fs *findings, pt promptTable) {
	title := pt.title
	t, ok := rf.table(text, title)
	if !pt.present {
		if ok {
			fs.add(IDDerivedRow, rf.file, "", "no "+title+" table", title, "%s has a %q table, but %s", rf.file, title, pt.absent)
		}
		return
	}
	if !ok {
		fs.add(IDDerivedTableMissing, rf.file, "", title+" table", nil, "%s has no %q table", rf.file, title)
		return
	}
	type key struct{ id, prompt string }
	var want []key
	for _, c := range v.configs {
		if c.doc == nil {
			continue
		}
		for _, id := range pt.entries(c.doc) {
			want = append(want, key{c.id, id})
		}
	}
	idCol, promptCol := slices.Index(t.headers, "configuration"), slices.Index(t.headers, pt.key)
	if idCol < 0 || promptCol < 0 {
		fs.add(IDDerivedTableMissing, rf.file, "", "configuration and "+pt.key+" columns", t.headers, "%s, %q table: no configuration or %s column", rf.file, title, pt.key)
		return
	}
	seen := map[key]bool{}
	for ri, row := range t.rows {
		if len(row) != len(t.headers) {
			fs.add(IDDerivedRow, rf.file, "", len(t.headers), len(row), "%s, %q table, row %d: %d cells under %d headers", rf.file, title, ri+1, len(row), len(t.headers))
			continue
		}
		k := key{row[idCol], row[promptCol]}
		d := v.e.docs[editions.ConfigPath(k.id)]
		c := v.byID[k.id]
		i := -1
		if c != nil && c.doc != nil {
			i = slices.Index(pt.entries(c.doc), k.prompt)
		}
		if d == nil || d.tree == nil || i < 0 || seen[k] {
			fs.add(IDDerivedRow, rf.file, "", "one row per configuration and "+pt.key, k.id+" "+k.prompt,
				"%s, %q table, row %d: no (or a second) row for configuration %q, %s %q", rf.file, title, ri+1, k.id, pt.key, k.prompt)
			continue
		}
		seen[k] = true
		entry, err := resolve(d.tree, ptr("metrics", pt.member, i))
		if err != nil {
			continue
		}
		for j, h := range t.headers {
			var want string
			var err error
			switch jc, joined := pt.joined[h]; {
			case j == idCol:
				continue
			case h == "capacity (experts/layer)":
				want, err = resultColumns[h](d.tree)
			case pt.columns[h] != nil:
				want, err = pt.columns[h](entry)
			case joined:
				want = editions.Unknown
				if jm, e := resolve(d.tree, "/metrics/"+jc.member); e == nil {
					list, _ := jm.([]any)
					for _, x := range list {
						if id, _ := resolve(x, "/prompt_id"); id == k.prompt {
							want, err = jc.col(x)
							break
						}
					}
				}
			default:
				fs.add(IDDerivedColumn, rf.file, "", nil, h, "%s, %q table: column %q is not one the verifier knows; its cells are unverified", rf.file, title, h)
				continue
			}
			if err != nil || row[j] != want {
				fs.add(IDDerivedCell, rf.file, "", want, row[j], "%s, %q table, %s %s, %q: the cell says %s, %s says %s (%v)",
					rf.file, title, k.id, k.prompt, h, row[j], editions.ConfigPath(k.id), want, err)
			}
		}
	}
	for _, k := range want {
		if !seen[k] {
			fs.add(IDDerivedRow, rf.file, "", k.id+" "+k.prompt, nil, "%s, %q table: configuration %s %s %s has no row", rf.file, title, k.id, pt.key, k.prompt)
		}
	}
}

func checkReportHeader(v *view, rf reportFormat, text string, fs *findings) {
	cd := v.e.docs[editions.ContractFile]
	if cd != nil && cd.tree != nil {
		wantID, wantSHA := cd.str("/id"), cd.str("/sha256")
		id, sha, ok := rf.contract(text)
		switch {
		case !ok:
			fs.add(IDDerivedContractLine, rf.file, "", map[string]string{"id": wantID, "sha256": wantSHA}, nil, "%s has no contract line", rf.file)
		case id != wantID || sha != wantSHA:
			fs.add(IDDerivedContractLine, rf.file, "", map[string]string{"id": wantID, "sha256": wantSHA},
				map[string]string{"id": id, "sha256": sha}, "%s names another contract than contract.json", rf.file)
		}
	}
	if cl := v.e.claims; cl != nil {
		n, ok := rf.claims(text)
		switch {
		case !ok:
			fs.add(IDDerivedClaimCount, rf.file, "", len(cl.Claims), nil, "%s does not say how many claims claims.json holds", rf.file)
		case n != len(cl.Claims):
			fs.add(IDDerivedClaimCount, rf.file, "", len(cl.Claims), n, "%s says %d claims; claims.json holds %d", rf.file, n, len(cl.Claims))
		}
	}
}

// pngSignature starts every PNG file.
var pngSignature = []byte("\x89PNG\r\n\x1a\n")

func checkReportPlots(v *view, rf reportFormat, text string, fs *findings) {
	seen := map[string]bool{}
	for _, m := range rf.plots.FindAllStringSubmatch(text, -1) {
		p := html.UnescapeString(m[1])
		if seen[p] {
			continue
		}
		seen[p] = true
		en := v.e.entries[p]
		if !cleanRelPath(p) || en == nil || !en.regular {
			fs.add(IDDerivedPlotMissing, rf.file, "", p, "absent", "%s shows %s, which the edition does not hold", rf.file, p)
			continue
		}
		b, err := readSnapshot(v.e, en)
		if err != nil || !bytes.HasPrefix(b, pngSignature) {
			fs.add(IDDerivedPlotNotPNG, p, "", "a PNG file", nil, "%s shows %s, which is not a PNG file", rf.file, p)
		}
	}
}
