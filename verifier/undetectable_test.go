package verifier

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/horizon-runmap/horizon/attest"
	"github.com/horizon-runmap/horizon/editions"
)

// What one edition cannot reveal. doc.go admits that a run faked uniformly
// stays self-consistent, so that no check of the edition alone catches it;
// only a trusted signature or a reproduction does. These tests pin both
// halves of that sentence, so the admission cannot silently become false in
// either direction: the fake passes every check, and the signature check
// fails it once the publisher's key is trusted.

// uniformlyFaster rewrites every worker of the edition as if the machine had
// been twice as fast: every token timestamp, the preparation and warmup
// times, each worker's wall clock (finished_at moves towards started_at) and
// the VRAM timeline, all scaled by 0.5; then it forges the rest.
func uniformlyFaster(t *testing.T, dir string) {
	t.Helper()
	const f = 0.5
	for _, id := range configIDs(t, dir) {
		for _, p := range rawPathsOf(t, dir, id) {
			edit(t, dir, p, func(d map[string]any) {
				for _, q := range arr(t, d, "requests") {
					q := q.(map[string]any)
					ns := arr(t, q, "token_ns")
					for i := range ns {
						ns[i] = json.Number(itoa(int(float64(numInt(t, ns[i])) * f)))
					}
					setTimings(t, q)
				}
				prep := obj(t, d, "preparation")
				prep["seconds"] = numFloat(t, prep["seconds"]) * f
				wu := obj(t, d, "warmup")
				wu["seconds"] = numFloat(t, wu["seconds"]) * f
				if tl, ok := obj(t, d, "observations")["vram_timeline"].([]any); ok {
					for _, s := range tl {
						s := s.(map[string]any)
						s["at_ns"] = json.Number(itoa(int(float64(numInt(t, s["at_ns"])) * f)))
					}
				}
				start, err := time.Parse(time.RFC3339Nano, d["started_at"].(string))
				if err != nil {
					t.Fatal(err)
				}
				end, err := time.Parse(time.RFC3339Nano, d["finished_at"].(string))
				if err != nil {
					t.Fatal(err)
				}
				d["finished_at"] = start.Add(time.Duration(float64(end.Sub(start)) * f)).UTC().Format(time.RFC3339Nano)
			})
		}
	}
	forge(t, dir)
}

func TestUniformlyFasterFakeNeedsASignatureOrAReproduction(t *testing.T) {
	schemas := fixtureSchemas(t)
	dir := newFixture(t)
	opts := fixtureOptions(t, dir, schemas)

	// The publisher signs the genuine edition.
	keyDir := t.TempDir()
	privPath, pubPath, _, err := attest.WriteKeyPair(keyDir)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := attest.LoadPrivateKey(privPath)
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := os.ReadFile(filepath.Join(dir, editions.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	env, err := attest.Sign(manifest, priv)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, editions.AttestationFile), env, 0o644); err != nil {
		t.Fatal(err)
	}
	trusted := opts
	trusted.TrustedKey = pubPath
	if genuine := verifyWith(t, dir, trusted); !genuine.Passed() {
		t.Fatalf("the signed genuine edition fails:\n%s", findingsText(genuine.Findings))
	}
	was := pooled(t, dir)

	// The forger drops the publisher's signature, which would no longer
	// match, and fakes the run.
	if err := os.Remove(filepath.Join(dir, editions.AttestationFile)); err != nil {
		t.Fatal(err)
	}
	uniformlyFaster(t, dir)
	fake := verifyWith(t, dir, opts)
	if !fake.Passed() {
		t.Fatalf("the uniformly faster fake no longer passes without a trusted key: doc.go's admission is out of date, or the fake is careless:\n%s", findingsText(fake.Findings))
	}
	if got := pooled(t, dir); got < 1.9*was {
		t.Fatalf("the fake claims %.1f tok/s against the genuine %.1f: not the twice-as-fast fake this test is about", got, was)
	}

	// With the publisher's key trusted, the fake has no signature by it.
	signed := verifyWith(t, dir, trusted)
	if signed.Passed() || !signed.Has(IDSignatureMissing) {
		t.Fatalf("a trusted signature must reject the fake, got:\n%s", findingsText(signed.Findings))
	}
}

func verifyWith(t *testing.T, dir string, o Options) *Report {
	t.Helper()
	rep, err := Verify(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// pooled is the first configuration's pooled decode rate as the edition
// states it.
func pooled(t *testing.T, dir string) float64 {
	t.Helper()
	d := readTree(t, dir, editions.ConfigPath(configIDs(t, dir)[0]))
	return numFloat(t, obj(t, d, "metrics")["pooled_decode_tok_s"])
}
