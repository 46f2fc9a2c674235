package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/horizon-runmap/horizon/campaigns"
	"github.com/horizon-runmap/horizon/campaigns/worker"
	"github.com/horizon-runmap/horizon/editions"
)

func republishCommand() *cli.Command {
	return &cli.Command{
		Name:      "republish",
		Usage:     "rewrite an edition's derived documents from its unchanged raw records with this build",
		UsageText: "horizon-bench republish EDITION --reason TEXT",
		Description: `Recomputes an edition's configuration documents, claims, plots, report.md,
report.html and manifest.json from its raw records and frozen campaign and
contract, with this build's writer. The raw records, campaign.json and
contract.json are kept byte for byte: nothing is measured again. Use it when
the report format or the derived documents gain something (claims with
intervals, a corrected sentence) and the edition's measurements still stand.

The manifest keeps the original created_at and tool (the build that ran the
workers, which horizon-verify holds every raw record to) and appends a
"republished" entry: when, by which build, and --reason. horizon-verify
reports it as a hint. An attestation (attestation.dsse.json) signs the old
manifest, so republish refuses a signed edition: sign it again afterwards
with horizon-bench attest.

The new edition replaces the old one in one rename: EDITION is never half
written. Build from a clean checkout (make build), so that the republication
names a clean VCS revision.

Example:

  horizon-bench republish editions/smoke-cpu --reason "claims carry their bootstrap intervals"
  horizon-verify editions/smoke-cpu

Exit codes: 0 republished; 2 no EDITION, no --reason, a directory that is not
an edition, or a signed edition; 1 the edition's documents do not load, or
a write failed.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "reason", Usage: "why the derived documents are rewritten (recorded in the manifest)"},
		},
		OnUsageError: onUsageError("horizon-bench republish"),
		Action: func(c *cli.Context) error {
			dir, err := trailingFlags(c, positional{"edition", "edition directory", `horizon-bench republish editions/smoke-cpu --reason "..."`})
			if err != nil {
				return err
			}
			reason := strings.TrimSpace(c.String("reason"))
			if reason == "" {
				return usageError("republish: --reason TEXT is required: it is recorded in the manifest beside this build")
			}
			if st, err := os.Stat(filepath.Join(dir, editions.ManifestFile)); err != nil || !st.Mode().IsRegular() {
				return usageError("republish: %s is not an edition directory (no %s)", dir, editions.ManifestFile)
			}
			if _, err := os.Lstat(filepath.Join(dir, "attestation.dsse.json")); err == nil {
				return usageError("republish: %s is signed (attestation.dsse.json signs its current manifest); remove the attestation, republish, and sign again with horizon-bench attest", dir)
			} else if !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			if b := editions.ReadBuildInfo(); b.VCSModified != "false" {
				fmt.Fprintf(c.App.ErrWriter, "republish: warning: this build's VCS state is %q (revision %s): the republication will name no clean revision (build with make build from a clean checkout)\n", b.VCSModified, b.VCSRevision)
			}
			if err := campaigns.Republish(dir, reason, worker.Runtime{}); err != nil {
				return cli.Exit(fmt.Sprintf("republish: %v", err), 1)
			}
			fmt.Fprintf(c.App.Writer, "republished %s (raw records, campaign and contract unchanged); check it with: horizon-verify %s\n", dir, dir)
			return nil
		},
	}
}
