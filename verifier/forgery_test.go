package verifier

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/editions"
)

// The consistent-forgery suite. A careless tampering (the mutation suite)
// leaves a hash or an aggregate behind; a careful forger does not. Each
// forgery here edits the edition and then calls forge, which re-derives
// everything a forger with this repository's tools would: every
// configuration's aggregates from the (edited) raw records, every claim's
// values from its sources, the frozen contract's and campaign's canonical
// hashes, and the manifest. The verifier must still fail the edition, with
// the finding ID the case names, while the shallow checks (manifest,
// recompute, claim values, frozen hashes) stay quiet: the forgery was
// consistent, and a deeper invariant caught it.
//
// Families register their cases from their own files (init functions
// appending to forgeries); TestForgeryCount holds the suite to its size.

// forgery is one consistent tampering. apply edits dir and must end with
// forge(t, dir) (or do the equivalent itself). opts, when set, adjusts the
// verification options (e.g. a trusted key).
type forgery struct {
	family string // the invariant family (binding, physics, signature, ...)
	name   string
	want   string // the finding ID that must fire
	apply  func(t *testing.T, dir string)
	opts   func(t *testing.T, dir string, o *Options)
}

// forgeries is every case, registered by the family files' init functions.
var forgeries []forgery

// minForgeries is the suite's size floor; raise it as families grow.
const minForgeries = 36

// forge re-derives everything a careful forger would after editing raw
// records or frozen documents: aggregates and claims (reaggregate), the
// frozen contract's and campaign's hashes (refreeze), and the manifest
// (rehash).
func forge(t testing.TB, dir string) {
	t.Helper()
	reaggregate(t, dir)
	refreeze(t, dir, editions.ContractFile, "contract")
	refreeze(t, dir, editions.CampaignFile, "campaign")
	rehash(t, dir)
}

// shallowIDs are the findings a consistent forgery must not trip: if one of
// them fires, the forgery was careless and proves nothing about the deeper
// invariant.
var shallowIDs = map[string]bool{
	IDManifestMissingFile: true, IDManifestSize: true, IDManifestHash: true, IDManifestUnlisted: true,
	IDContractHash: true, IDContractCampaignHash: true,
	IDRecomputePooledDecode: true, IDRecomputeOverallOutput: true, IDRecomputeTTFTMean: true, IDRecomputeResponseMean: true,
	IDClaimsValue: true, IDClaimsSourceValue: true, IDClaimsRatio: true,
}

func TestForgeryCount(t *testing.T) {
	if len(forgeries) < minForgeries {
		t.Fatalf("only %d consistent forgeries registered, want at least %d", len(forgeries), minForgeries)
	}
	byFamily := map[string]int{}
	seen := map[string]bool{}
	for _, f := range forgeries {
		byFamily[f.family]++
		if seen[f.name] {
			t.Errorf("forgery %q registered twice", f.name)
		}
		seen[f.name] = true
		if _, ok := catalogue[f.want]; !ok {
			t.Errorf("forgery %q wants %q, which is not a catalogued finding ID", f.name, f.want)
		}
	}
	var fams []string
	for k, n := range byFamily {
		fams = append(fams, k+"="+itoa(n))
	}
	sort.Strings(fams)
	t.Logf("%d consistent forgeries: %s", len(forgeries), strings.Join(fams, " "))
}

// TestForgeries runs every forgery on the fixture edition.
func TestForgeries(t *testing.T) {
	schemas := fixtureSchemas(t)
	for _, f := range forgeries {
		t.Run(f.family+"/"+f.name, func(t *testing.T) {
			dir := newFixture(t)
			runForgery(t, dir, f, fixtureOptions(t, dir, schemas))
		})
	}
}

// TestForgeriesOnCommittedEditions runs every forgery on a copy of each
// committed edition (a case whose precondition an edition lacks skips).
func TestForgeriesOnCommittedEditions(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	schemas := fixtureSchemas(t)
	for _, src := range committedEditions(t) {
		t.Run(filepath.Base(src), func(t *testing.T) {
			for _, f := range forgeries {
				t.Run(f.family+"/"+f.name, func(t *testing.T) {
					t.Parallel() // each case verifies its own copy
					dir := filepath.Join(t.TempDir(), filepath.Base(src))
					if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
						t.Fatal(err)
					}
					runForgery(t, dir, f, Options{Schemas: schemas})
				})
			}
		})
	}
}

// runForgery applies f to the edition in dir and checks the verdict.
func runForgery(t *testing.T, dir string, f forgery, o Options) {
	t.Helper()
	f.apply(t, dir)
	if f.opts != nil {
		f.opts(t, dir, &o)
	}
	rep, err := Verify(dir, o)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	for _, x := range rep.Findings {
		if x.ID == IDInternalPanic {
			t.Fatalf("a check crashed: %s", x.Message)
		}
		if shallowIDs[x.ID] && x.ID != f.want {
			t.Errorf("forgery %q is not consistent: it trips %s %s: %s", f.name, x.ID, x.Where(), x.Message)
		}
	}
	if rep.Passed() {
		t.Fatalf("consistent forgery %q passed verification:\n%s", f.name, findingsText(rep.Findings))
	}
	if !rep.Has(f.want) {
		t.Fatalf("consistent forgery %q: want finding %s, got:\n%s", f.name, f.want, findingsText(rep.Findings))
	}
}

// fixtureOptions are the options the fixture edition verifies clean under:
// its contract is PERF-REAL-v1 cut down, not a released contract, so it is
// named explicitly by the YAML file newFixture writes beside the edition.
func fixtureOptions(t testing.TB, dir string, schemas SchemaSet) Options {
	t.Helper()
	return Options{Schemas: schemas, ContractFile: fixtureContractFile(dir)}
}
