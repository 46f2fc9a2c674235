package campaigns_test

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	. "github.com/horizon-runmap/horizon/campaigns"
	"github.com/horizon-runmap/horizon/editions"
	"github.com/horizon-runmap/horizon/verifier"
)

// TestRepublish: republishing a committed edition (a residency and an
// IFEval one) keeps its raw records, frozen campaign and contract byte for
// byte and its manifest's creation time and tool, appends one
// republication with the reason, and leaves an edition that verifies, with
// the republication reported as a hint.
func TestRepublish(t *testing.T) {
	for _, name := range []string{"smoke-cpu", "ifeval-smoke-cpu"} {
		t.Run(name, func(t *testing.T) {
			src := filepath.Join("..", "editions", name)
			dir := filepath.Join(t.TempDir(), name)
			if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
				t.Fatal(err)
			}
			var before editions.Manifest
			if err := ReadJSONStrict(filepath.Join(src, editions.ManifestFile), &before); err != nil {
				t.Fatal(err)
			}
			if err := Republish(dir, "a test republication", nil); err != nil {
				t.Fatal(err)
			}
			var after editions.Manifest
			if err := ReadJSONStrict(filepath.Join(dir, editions.ManifestFile), &after); err != nil {
				t.Fatal(err)
			}
			if after.CreatedAt != before.CreatedAt || !reflect.DeepEqual(after.Tool, before.Tool) {
				t.Fatalf("manifest created_at/tool changed: %s %+v -> %s %+v", before.CreatedAt, before.Tool.VCSRevision, after.CreatedAt, after.Tool.VCSRevision)
			}
			prev, _, err := editions.HashFile(filepath.Join(src, editions.ManifestFile))
			if err != nil {
				t.Fatal(err)
			}
			if n := len(after.Republished); n != len(before.Republished)+1 || after.Republished[n-1].Reason != "a test republication" ||
				after.Republished[n-1].PreviousManifestSHA256 != prev {
				t.Fatalf("republished %+v, want one more with the reason and previous manifest %s", after.Republished, prev)
			}
			for _, f := range before.Files {
				if !strings.HasPrefix(f.Path, "raw/") && f.Path != editions.CampaignFile && f.Path != editions.ContractFile {
					continue
				}
				a, err := os.ReadFile(filepath.Join(src, filepath.FromSlash(f.Path)))
				if err != nil {
					t.Fatal(err)
				}
				b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f.Path)))
				if err != nil || !bytes.Equal(a, b) {
					t.Fatalf("%s changed (or vanished: %v)", f.Path, err)
				}
			}
			set, err := verifier.EmbeddedSchemas()
			if err != nil {
				t.Fatal(err)
			}
			rep, err := verifier.Verify(dir, verifier.Options{Schemas: set})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Passed() || !rep.Has(verifier.IDManifestRepublished) {
				t.Fatalf("republished edition: passed %v, republication hint %v", rep.Passed(), rep.Has(verifier.IDManifestRepublished))
			}
		})
	}
	if err := Republish(t.TempDir(), "x", nil); err == nil {
		t.Fatal("republished a directory that is not an edition")
	}
}
