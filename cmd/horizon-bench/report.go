package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/horizon-runmap/horizon/campaigns"
	"github.com/horizon-runmap/horizon/campaigns/report"
	"github.com/horizon-runmap/horizon/editions"
	"github.com/horizon-runmap/horizon/verifier"
)

func reportCommand() *cli.Command {
	// -o and --output share one destination (see simulateCommand).
	output := new(string)
	formats := strings.Join(report.TableFormats, ", ")
	return &cli.Command{
		Name:      "report",
		Usage:     "print an edition's results table as Markdown, CSV, JSON or JSON Lines",
		UsageText: "horizon-bench report EDITION [-o md|csv|json|jsonl] [--out FILE [--force]]",
		Description: `Prints the results table of an existing edition, one row per configuration in
campaign order, from its configs/<id>.json documents. Every format comes from
the one field list that report.md and report.html render, so all of them show
the same columns, rounded the same way:

  md     the table exactly as the edition's report.md carries it (default)
  csv    a header row (the column headers with their units), then one row
         per configuration; the cells are the md table's
  json   an array of objects, one per configuration, one per line. Keys are
         stable snake_case names with the unit as suffix (pooled_decode_tok_s,
         ttft_mean_ms, h2d_mib); numbers are JSON numbers, unrounded, in that
         unit. capacity, block_spread_tok_s and requests are objects of their
         two numbers. An observation that was not made is null, never 0, and
         <key>_status beside it says UNKNOWN or UNSUPPORTED (null when the
         observation was made)
  jsonl  the same objects, one per line, without the array

An edition of a contract with declared prompt lengths (PERF-PREFILL-v1,
PERF-DEPTH-v1) also has the per-prompt tables its report.md carries, after
the results table, from their own field lists: "Prefill by prompt length"
(a row per configuration and prompt: configuration, capacity, prompt,
prompt_tokens, prefill_mean_tok_s, prefill_mean_ci95_tok_s,
prefill_median_tok_s, requests) and "Decode by context depth" (a row per
configuration and depth: configuration, capacity, depth, depth_tokens,
pooled_decode_tok_s, pooled_decode_ci95_tok_s, decode_mean_tok_s,
decode_median_tok_s, tpot_ms, prefill_mean_tok_s, requests). md gives each
under report.md's heading; csv after an empty line, with its own header row;
json and jsonl as each configuration's "prefill_lengths" and
"decode_depths" arrays of row objects with those keys (an interval or rate
not observed is null with its _status). Other editions' output is unchanged.

Examples:

  horizon-bench report editions/smoke-cpu -o csv
  horizon-bench report editions/full-residency-v1 -o json --out /tmp/full.json
  horizon-bench report editions/depth-smoke-cpu -o csv

--out FILE writes the table to FILE instead of stdout, whole or not at all (a
temporary file beside it, renamed into place). An existing FILE is refused
unless --force; a directory or other non-file is always refused.

The edition is read, not verified: horizon-verify EDITION checks its numbers.

Exit codes: 0 printed or written; 2 no EDITION, a directory that is not an
edition, an unknown -o format, or --out FILE that exists without --force;
1 an edition whose documents do not load (run horizon-verify on it), or a
write that failed.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "md", Destination: output, Usage: "output `FORMAT`: " + formats},
			&cli.StringFlag{Name: "out", Usage: "write to `FILE` instead of stdout (atomically; refused if FILE exists, unless --force)"},
			&cli.BoolFlag{Name: "force", Usage: "with --out, replace an existing file"},
		},
		Action: func(c *cli.Context) error { return runReport(c, output) },
	}
}

// reportFlags are the report command's parsed arguments.
type reportFlags struct {
	edition, format, out string
	force                bool
}

func parseReportArgs(c *cli.Context, output *string) (reportFlags, error) {
	dir, err := trailingFlags(c, positional{"edition", "edition directory", "horizon-bench report editions/smoke-cpu -o csv"})
	if err != nil {
		return reportFlags{}, err
	}
	f := reportFlags{edition: dir, format: *output, out: c.String("out"), force: c.Bool("force")}
	if !slices.Contains(report.TableFormats, f.format) {
		return f, usageError("report: -o %q: want one of %s", f.format, strings.Join(report.TableFormats, ", "))
	}
	if f.force && f.out == "" {
		return f, usageError("report: --force replaces an --out FILE; without --out the table goes to stdout")
	}
	if f.out != "" {
		if err := checkReportOut(f.out, f.force); err != nil {
			return f, err
		}
	}
	return f, nil
}

// checkReportOut refuses an --out that names anything but a regular file
// or nothing, and an existing file without --force.
func checkReportOut(out string, force bool) error {
	st, err := os.Lstat(out)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return usageError("report: --out %s: %v", out, err)
	case !st.Mode().IsRegular():
		return usageError("report: --out %s exists and is not a regular file (%s): name a file", out, st.Mode().Type())
	case !force:
		return usageError("report: --out %s exists: give --force to replace it, or name another file", out)
	}
	return nil
}

func runReport(c *cli.Context, output *string) error {
	f, err := parseReportArgs(c, output)
	if err != nil {
		return err
	}
	if err := residencyEdition("report", f.edition); err != nil {
		return err
	}
	docs, err := readEditionConfigs(f.edition)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := report.ExportResults(&b, f.format, docs); err != nil {
		return fmt.Errorf("report: %s: %w", f.edition, err)
	}
	if f.out == "" {
		_, err := c.App.Writer.Write(b.Bytes())
		return err
	}
	return writeReportOut(f.out, b.Bytes(), f.force)
}

// readEditionConfigs reads an edition's configuration documents in
// campaign order (report.md's row order) with the loaders that already
// read them: the verifier's for manifest.json and configs/<id>.json, the
// runner's for the frozen campaign. A directory without a horizon
// manifest is not an edition (a usage error); an edition whose documents
// do not load is damaged (exit 1).
func readEditionConfigs(dir string) ([]editions.ConfigDoc, error) {
	notEdition := func(why string) error {
		return usageError("report: %s is not an edition (%s): give an edition directory, e.g. horizon-bench report editions/smoke-cpu", dir, why)
	}
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, notEdition("no such directory")
	case err != nil:
		return nil, usageError("report: %v", err)
	case !st.IsDir():
		return nil, notEdition("not a directory")
	}
	mb, err := os.ReadFile(filepath.Join(dir, editions.ManifestFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, notEdition("no " + editions.ManifestFile)
	}
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	m, err := verifier.LoadManifest(mb)
	if err != nil || m.Schema != editions.SchemaManifest || m.Edition == "" {
		return nil, notEdition(editions.ManifestFile + " is not a horizon manifest")
	}
	damaged := func(err error) error {
		return fmt.Errorf("report: edition %s does not load (horizon-verify %s says what is wrong): %w", m.Edition, dir, err)
	}
	camp, _, _, err := campaigns.LoadFrozen(filepath.Join(dir, editions.CampaignFile), filepath.Join(dir, editions.ContractFile))
	if err != nil {
		return nil, damaged(err)
	}
	if camp.Edition != m.Edition {
		return nil, damaged(fmt.Errorf("the campaign is for edition %s, the manifest says %s", camp.Edition, m.Edition))
	}
	docs := make([]editions.ConfigDoc, 0, len(camp.Configurations))
	for _, cfg := range camp.Configurations {
		rel := editions.ConfigPath(cfg.ID)
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			return nil, damaged(err)
		}
		d, err := verifier.LoadConfig(b)
		if err != nil {
			return nil, damaged(fmt.Errorf("%s: %w", rel, err))
		}
		if d.ID != cfg.ID {
			return nil, damaged(fmt.Errorf("%s is configuration %q", rel, d.ID))
		}
		docs = append(docs, *d)
	}
	return docs, nil
}

// writeReportOut writes data to out whole or not at all: a temporary file
// beside it, synced, then moved into place. Without force the move is a
// hard link, which fails rather than replace a file that appeared since
// checkReportOut looked.
func writeReportOut(out string, data []byte, force bool) (err error) {
	dir := filepath.Dir(out)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(out)+".tmp-")
	if err != nil {
		return fmt.Errorf("report: --out %s: %w", out, err)
	}
	defer func() {
		tmp.Close()
		os.Remove(tmp.Name()) // after the rename or link: gone, or the link's twin
	}()
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("report: write %s: %w", out, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("report: sync %s: %w", out, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if force {
		err = os.Rename(tmp.Name(), out)
	} else if err = os.Link(tmp.Name(), out); errors.Is(err, fs.ErrExist) {
		return usageError("report: --out %s exists: give --force to replace it, or name another file", out)
	}
	if err != nil {
		return fmt.Errorf("report: --out %s: %w", out, err)
	}
	return editions.SyncDir(dir)
}
