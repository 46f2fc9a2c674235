package report

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
	"github.com/horizon-runmap/horizon/fidelity"
)

// TestFidelityReportGolden: the committed fidelity smoke edition's shards
// aggregate to its paired documents again, and its reports render as the
// golden files in testdata/ (refresh with -update after an intended
// change, then republish the edition).
func TestFidelityReportGolden(t *testing.T) {
	const dir = "../../editions/fidelity-smoke-cpu"
	read := func(p string, v any) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	var cd editions.CampaignDoc
	var kd editions.ContractDoc
	read(editions.CampaignFile, &cd)
	read(editions.ContractFile, &kd)
	c, err := CampaignFromDoc(cd)
	if err != nil {
		t.Fatal(err)
	}
	k, err := contracts.FidelityFromJSON(kd.Contract)
	if err != nil {
		t.Fatal(err)
	}
	ins, err := fidelity.Inputs(k)
	if err != nil {
		t.Fatal(err)
	}
	var pairs []editions.FidelityPair
	for _, id := range FidelityPairIDs(c, k) {
		var shards []*editions.FidelityShard
		for s := 1; s <= k.Shards(); s++ {
			var sh editions.FidelityShard
			read(editions.FidelityShardPath(id, s), &sh)
			shards = append(shards, &sh)
		}
		d, err := fidelity.Aggregate(k, ins, id, shards)
		if err != nil {
			t.Fatal(err)
		}
		var committed editions.FidelityPair
		read(editions.FidelityPairPath(id), &committed)
		a, _ := json.Marshal(d)
		b, _ := json.Marshal(committed)
		if !bytes.Equal(a, b) {
			t.Errorf("pair %s: the shards aggregate to another document than the committed one", id)
		}
		pairs = append(pairs, d)
	}
	for _, g := range []struct {
		golden string
		write  func(*bytes.Buffer) error
	}{
		{"fidelity-smoke-cpu.report.md", func(b *bytes.Buffer) error { return FidelityMarkdown(b, c, k, kd.SHA256, pairs) }},
		{"fidelity-smoke-cpu.report.html", func(b *bytes.Buffer) error { return FidelityHTML(b, c, k, kd.SHA256, pairs) }},
	} {
		var b bytes.Buffer
		if err := g.write(&b); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join("testdata", g.golden)
		if *update {
			if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(want, b.Bytes()) {
			t.Errorf("%s differs from the rendered report (go test ./campaigns/report -run TestFidelityReportGolden -update)", p)
		}
	}
}
