package main

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/horizon-runmap/horizon/attest"
	"github.com/horizon-runmap/horizon/editions"
)

func attestCommand() *cli.Command {
	return &cli.Command{
		Name:      "attest",
		Usage:     "sign an edition: write attestation.dsse.json over its manifest",
		UsageText: "horizon-bench attest <edition-dir> --key FILE",
		Description: `Signs an edition with a private key from horizon-bench keygen. It writes
<edition-dir>/attestation.dsse.json: a DSSE envelope (payload type
application/vnd.in-toto+json) holding an in-toto Statement v1 whose one
subject is manifest.json with its SHA-256, and whose predicate
(https://horizon-runmap.dev/attestation/edition/v1) names the edition and the
tool revision from the manifest. Since the manifest lists every other file
with its SHA-256, the signature covers the whole edition; the manifest does
not list the attestation (it cannot: the attestation signs its hash).

Before signing, attest checks that the edition's files are exactly those its
manifest lists, with their sizes and hashes: it does not sign an edition that
is already inconsistent. An existing attestation is replaced atomically
(re-signing with another key replaces the old signature).

   horizon-bench keygen --out ~/.horizon &&
   horizon-bench attest editions/smoke-cpu --key ~/.horizon/horizon.key &&
   horizon-verify editions/smoke-cpu --trusted-key ~/.horizon/horizon.pub

A signature says who vouched for the edition, not that its numbers are true;
horizon-verify without --trusted-key reports a signature as unverified.

Exit status: 0 written; 2 bad arguments, not an edition directory, or an
unreadable key; 1 the edition's files do not match its manifest, or any other
failure.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "key", Usage: "sign with the ed25519 private key in `FILE` (horizon-bench keygen's horizon.key)"},
		},
		Action: runAttest,
	}
}

// parseAttestArgs returns the edition directory and the key file. Like
// run, it parses flags that follow the edition directory itself (urfave/cli
// stops at the first argument).
func parseAttestArgs(c *cli.Context) (dir, key string, err error) {
	if dir, err = trailingFlags(c, positional{"edition", "edition directory",
		"horizon-bench attest editions/smoke-cpu --key ~/.horizon/horizon.key"}); err != nil {
		return "", "", err
	}
	key = c.String("key")
	if key == "" {
		return "", "", usageError("attest: --key FILE is required (a private key from horizon-bench keygen)")
	}
	return dir, key, nil
}

func runAttest(c *cli.Context) error {
	dir, keyPath, err := parseAttestArgs(c)
	if err != nil {
		return err
	}
	manifest, m, err := readEditionManifest(dir)
	if err != nil {
		return usageError("attest: %v", err)
	}
	priv, err := attest.LoadPrivateKey(keyPath)
	if err != nil {
		return usageError("attest: --key: %v", err)
	}
	if err := checkListedFiles(dir, m); err != nil {
		return fmt.Errorf("attest: refusing to sign %s: %w (run horizon-verify on it)", dir, err)
	}
	env, err := attest.Sign(manifest, priv)
	if err != nil {
		return fmt.Errorf("attest: %w", err)
	}
	out := filepath.Join(dir, editions.AttestationFile)
	if err := editions.WriteFileAtomic(out, env); err != nil {
		return fmt.Errorf("attest: %w", err)
	}
	sum := sha256.Sum256(manifest)
	fmt.Fprintf(c.App.Writer, "wrote %s: edition %s, manifest.json sha256 %s, signed by key id %s\n",
		out, m.Edition, hex.EncodeToString(sum[:]), attest.KeyID(priv.Public().(ed25519.PublicKey)))
	return nil
}

// readEditionManifest reads dir/manifest.json and refuses anything that is
// not a horizon edition (no manifest, or a manifest of another schema).
func readEditionManifest(dir string) ([]byte, *editions.Manifest, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("%s is not an edition directory: %w", dir, err)
	}
	if !st.IsDir() {
		return nil, nil, fmt.Errorf("%s is not an edition directory", dir)
	}
	b, err := os.ReadFile(filepath.Join(dir, editions.ManifestFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("%s is not a horizon edition: it has no %s", dir, editions.ManifestFile)
	}
	if err != nil {
		return nil, nil, err
	}
	var m editions.Manifest
	if err := json.Unmarshal(b, &m); err != nil || m.Schema != editions.SchemaManifest {
		return nil, nil, fmt.Errorf("%s is not a horizon edition: its %s is not a %s document", dir, editions.ManifestFile, editions.SchemaManifest)
	}
	return b, &m, nil
}

// checkListedFiles reports the first difference between the edition's
// files and its manifest, the attestation aside (it is never listed).
func checkListedFiles(dir string, m *editions.Manifest) error {
	got, err := editions.BuildManifest(dir, m.Edition, time.Time{}, editions.BuildInfo{})
	if err != nil {
		return err
	}
	want := map[string]editions.FileEntry{}
	for _, f := range m.Files {
		want[f.Path] = f
	}
	for _, f := range got.Files {
		if f.Path == editions.AttestationFile {
			continue
		}
		w, ok := want[f.Path]
		switch {
		case !ok:
			return fmt.Errorf("%s is not listed in %s", f.Path, editions.ManifestFile)
		case w.Bytes != f.Bytes || w.SHA256 != f.SHA256:
			return fmt.Errorf("%s does not have the size and SHA-256 %s lists", f.Path, editions.ManifestFile)
		}
		delete(want, f.Path)
	}
	for _, f := range m.Files {
		if _, ok := want[f.Path]; !ok {
			continue
		}
		if f.Path == editions.AttestationFile {
			return fmt.Errorf("%s lists %s, which it cannot cover (an attestation signs the manifest's hash)", editions.ManifestFile, f.Path)
		}
		return fmt.Errorf("%s is listed in %s but missing", f.Path, editions.ManifestFile)
	}
	return nil
}
