package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/horizon-runmap/horizon/verifier"
)

// writeText prints the report for people: a header, then each check with
// its status and its findings (severity, ID, file#pointer, expected, found,
// message), then one summary line.
func writeText(w io.Writer, rep *verifier.Report, code int) error {
	s := rep.Summary()
	ew := &errWriter{w: w}
	if rep.Unreadable() {
		for _, f := range rep.Findings {
			if f.ID == verifier.IDEditionUnreadable {
				ew.printf("horizon-verify: %s: %s\n", f.ID, f.Message)
			}
		}
		ew.printf("\nUNREADABLE: %s cannot be verified (exit %d)\n", rep.Dir, code)
		return ew.err
	}
	records, requests := "raw records", "measured requests"
	if rep.Ran != nil && (slices.Contains(rep.Ran, "ifeval") || slices.Contains(rep.Ran, "fidelity")) {
		records, requests = "shard records", "responses"
	}
	ew.printf("horizon-verify %s (edition %s): %d files, %d configurations, %d %s, %d %s, %d claims\n\n",
		rep.Dir, s.Edition, s.Files, s.Configurations, s.RawRecords, records, s.Requests, requests, s.Claims)
	for _, c := range s.Checks {
		status := strings.ToUpper(c.Status)
		counts := ""
		if c.Errors+c.Hints > 0 {
			counts = fmt.Sprintf("  %s, %s", plural(c.Errors, "error"), plural(c.Hints, "hint"))
		}
		ew.printf("%-12s %s%s\n", c.Check, status, counts)
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		for _, f := range rep.Findings {
			if f.Check != c.Check {
				continue
			}
			where := f.Where()
			if where == "" {
				where = "(edition)"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", f.Severity, f.ID, where)
			if f.Expected != nil || f.Found != nil {
				fmt.Fprintf(tw, "  \t\texpected %s, found %s\n", jsonValue(f.Expected), jsonValue(f.Found))
			}
			fmt.Fprintf(tw, "  \t\t%s\n", f.Message)
		}
		tw.Flush()
	}
	verdict := "PASS"
	if s.Errors > 0 {
		verdict = "FAIL"
	}
	ew.printf("\n%s: %s, %s (exit %d)\n", verdict, plural(s.Errors, "error"), plural(s.Hints, "hint"), code)
	return ew.err
}

// jsonValue renders a finding's expected or found value exactly: numbers
// with every digit of their float64 value, strings quoted.
func jsonValue(v any) string {
	if v == nil {
		return "-"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// listIDs prints the catalogue of finding IDs.
func listIDs(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tID\tSEVERITY\tMEANING")
	for _, info := range verifier.IDs() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", info.Check, info.ID, info.Severity, info.Summary)
	}
	tw.Flush()
}

// errWriter keeps the first write error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func (e *errWriter) printf(format string, args ...any) { fmt.Fprintf(e, format, args...) }
