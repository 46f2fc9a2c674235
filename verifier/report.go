package verifier

import "slices"

// Report is the outcome of one verification: every finding, in check order
// (Checks), and within a check in a deterministic order (sorted paths, then
// document order).
type Report struct {
	Dir      string
	Edition  string // the manifest's edition id ("" when unreadable)
	Findings []Finding

	// Counts of what was examined.
	Files          int // regular files in the edition, manifest.json included
	Configurations int
	RawRecords     int
	Requests       int // measured requests across all raw records
	Claims         int
	// Ran names the checks that applied to this edition's kind ("edition"
	// first); nil means all of Checks. A check that did not apply is
	// reported "n/a", never "pass".
	Ran []string
}

// Errors counts error findings.
func (r *Report) Errors() int { return r.count(Error) }

// Hints counts hint findings.
func (r *Report) Hints() int { return r.count(Hint) }

// Passed reports whether the edition has no error finding.
func (r *Report) Passed() bool { return r.Errors() == 0 }

// Unreadable reports whether the edition could not be read at all.
func (r *Report) Unreadable() bool {
	for _, f := range r.Findings {
		if f.ID == IDEditionUnreadable {
			return true
		}
	}
	return false
}

func (r *Report) count(s Severity) int {
	n := 0
	for _, f := range r.Findings {
		if f.Severity == s {
			n++
		}
	}
	return n
}

// Has reports whether a finding with the id exists.
func (r *Report) Has(id string) bool {
	for _, f := range r.Findings {
		if f.ID == id {
			return true
		}
	}
	return false
}

// CheckSummary is one check's outcome: "pass" (no finding), "hint" (hints
// only: it ran, but something was not verified), "fail", or "skipped" (the
// edition could not be read).
type CheckSummary struct {
	Check  string `json:"check"`
	Status string `json:"status"`
	Errors int    `json:"errors"`
	Hints  int    `json:"hints"`
}

// Summary is the report's totals.
type Summary struct {
	Dir            string         `json:"dir"`
	Edition        string         `json:"edition"`
	Result         string         `json:"result"` // "pass", "fail" or "unreadable"
	Errors         int            `json:"errors"`
	Hints          int            `json:"hints"`
	Checks         []CheckSummary `json:"checks"`
	Files          int            `json:"files"`
	Configurations int            `json:"configurations"`
	RawRecords     int            `json:"raw_records"`
	Requests       int            `json:"requests"`
	Claims         int            `json:"claims"`
}

// Summary totals the report.
func (r *Report) Summary() Summary {
	s := Summary{
		Dir: r.Dir, Edition: r.Edition,
		Errors: r.Errors(), Hints: r.Hints(),
		Files: r.Files, Configurations: r.Configurations, RawRecords: r.RawRecords,
		Requests: r.Requests, Claims: r.Claims,
	}
	for _, c := range Checks {
		cs := CheckSummary{Check: c}
		for _, f := range r.Findings {
			if f.Check != c {
				continue
			}
			if f.Severity == Error {
				cs.Errors++
			} else {
				cs.Hints++
			}
		}
		switch {
		case r.Unreadable() && c != "edition":
			cs.Status = "skipped"
		case r.Ran != nil && !slices.Contains(r.Ran, c):
			cs.Status = "n/a"
		case cs.Errors > 0:
			cs.Status = "fail"
		case cs.Hints > 0:
			cs.Status = "hint"
		default:
			cs.Status = "pass"
		}
		s.Checks = append(s.Checks, cs)
	}
	switch {
	case r.Unreadable():
		s.Result = "unreadable"
	case s.Errors > 0:
		s.Result = "fail"
	default:
		s.Result = "pass"
	}
	return s
}
