package report

import (
	"slices"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
)

// TestResultFieldsOptionalColumns: the interval columns appear only when
// every configuration carries an uncertainty, the prefill column only when
// every one carries a prefill aggregate, each right after its neighbour,
// and a report of documents with a prefill but no uncertainty (a
// configuration whose requests have no decode time) states no interval.
func TestResultFieldsOptionalColumns(t *testing.T) {
	base := loadConfigs(t, "smoke-cpu") // uncertainty and prefill in every document
	strip := func(unc, pf bool) []editions.ConfigDoc {
		out := slices.Clone(base)
		for i := range out {
			if !unc {
				out[i].Uncertainty = nil
			}
			if !pf {
				out[i].Metrics.Prefill = nil
			}
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		unc, pf bool
		want    []string // keys in order, among the optional ones and their anchors
	}{
		{"neither", false, false, []string{"ttft_mean_ms", "response_mean_s"}},
		{"intervals only", true, false, []string{"ttft_mean_ms", "ttft_mean_ci95_ms", "response_mean_s"}},
		{"prefill only", false, true, []string{"ttft_mean_ms", "prefill_tok_s", "response_mean_s"}},
		{"both", true, true, []string{"ttft_mean_ms", "ttft_mean_ci95_ms", "prefill_tok_s", "response_mean_s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docs := strip(tc.unc, tc.pf)
			var keys []string
			for _, f := range resultFields(docs) {
				if slices.Contains([]string{"ttft_mean_ms", "ttft_mean_ci95_ms", "prefill_tok_s", "response_mean_s"}, f.Key) {
					keys = append(keys, f.Key)
				}
			}
			if !slices.Equal(keys, tc.want) {
				t.Fatalf("columns %v, want %v", keys, tc.want)
			}
			k := &contracts.Contract{}
			r := buildReport(&Campaign{Edition: "x", Device: "cpu"}, k, "", nil, docs, nil, nil, 0, nil)
			ci := slices.ContainsFunc(r.Caveats, func(s string) bool { return strings.Contains(s, "95% CIs") })
			if ci != tc.unc {
				t.Fatalf("interval caveat %v, want %v", ci, tc.unc)
			}
		})
	}
	// One document without a prefill hides the column for all.
	docs := strip(true, true)
	docs[1].Metrics.Prefill = nil
	if slices.ContainsFunc(resultFields(docs), func(f field) bool { return f.Key == "prefill_tok_s" }) {
		t.Fatal("prefill column shown although one configuration has no prefill aggregate")
	}
}

// withoutDTypes clears the KV and activation dtypes the workers record, so
// that docs stand for an edition written before they were recorded, however
// recent the committed edition the test reads.
func withoutDTypes(docs []editions.ConfigDoc) []editions.ConfigDoc {
	for i := range docs {
		docs[i].Artifact.KVDType, docs[i].Artifact.ExpertActivationDType, docs[i].Artifact.DenseActivationDType = "", "", ""
	}
	return docs
}

// TestKVColumn: the KV cache column follows the executor column where every
// configuration records artifact.kv_dtype, and is absent where one does not
// (editions made before the field keep their table).
func TestKVColumn(t *testing.T) {
	base := withoutDTypes(loadConfigs(t, "smoke-cpu"))
	keys := func(docs []editions.ConfigDoc) []string {
		var out []string
		for _, f := range resultFields(docs) {
			out = append(out, f.Key)
		}
		return out
	}
	if slices.Contains(keys(base), "kv_cache") {
		t.Fatal("a KV cache column for documents without kv_dtype")
	}
	docs := slices.Clone(base)
	for i := range docs {
		docs[i].Artifact.KVDType = editions.KVFP16
	}
	docs[0].Artifact.KVDType = editions.KVFP32
	ks := keys(docs)
	i := slices.Index(ks, "executor")
	if i < 0 || i+1 >= len(ks) || ks[i+1] != "kv_cache" {
		t.Fatalf("columns %v: want kv_cache right after executor", ks)
	}
	f := resultFields(docs)[i+1]
	if f.Header() != "KV cache" || f.Value(&docs[0]) != "FP32" || f.Value(&docs[1]) != "FP16" {
		t.Fatalf("column %q: %q, %q", f.Header(), f.Value(&docs[0]), f.Value(&docs[1]))
	}
	docs[2].Artifact.KVDType = ""
	if slices.Contains(keys(docs), "kv_cache") {
		t.Fatal("a KV cache column although one configuration records no kv_dtype")
	}
}

// TestExpertActivationsColumn: the expert activations column follows the
// executor column (and the KV cache column, where there is one) where some
// configuration records artifact.expert_activation_dtype (workers record
// FP16 only), reading FP32 where a configuration records none; editions
// without FP16 expert activations keep their table.
func TestExpertActivationsColumn(t *testing.T) {
	base := withoutDTypes(loadConfigs(t, "smoke-cpu"))
	keys := func(docs []editions.ConfigDoc) []string {
		var out []string
		for _, f := range resultFields(docs) {
			out = append(out, f.Key)
		}
		return out
	}
	if slices.Contains(keys(base), "expert_activations") {
		t.Fatal("an expert activations column for documents without expert_activation_dtype")
	}
	docs := slices.Clone(base)
	docs[1].Artifact.ExpertActivationDType = editions.ExpertActFP16
	ks := keys(docs)
	i := slices.Index(ks, "executor")
	if i < 0 || i+1 >= len(ks) || ks[i+1] != "expert_activations" {
		t.Fatalf("columns %v: want expert_activations right after executor", ks)
	}
	f := resultFields(docs)[i+1]
	if f.Header() != "expert activations" || f.Value(&docs[0]) != "FP32" || f.Value(&docs[1]) != "FP16" {
		t.Fatalf("column %q: %q, %q", f.Header(), f.Value(&docs[0]), f.Value(&docs[1]))
	}
	for i := range docs {
		docs[i].Artifact.KVDType = editions.KVFP32
	}
	ks = keys(docs)
	if i := slices.Index(ks, "executor"); i < 0 || i+2 >= len(ks) || ks[i+1] != "kv_cache" || ks[i+2] != "expert_activations" {
		t.Fatalf("columns %v: want kv_cache, then expert_activations, right after executor", ks)
	}
}

// TestVariantExpertActivations: declared FP16 expert activations set a
// configuration's plot series apart, named so that they do not read as an
// FP16 KV cache; fp32 spelled out is the default.
func TestVariantExpertActivations(t *testing.T) {
	for _, tc := range []struct {
		cfg  Configuration
		want string
	}{
		{Configuration{}, ""},
		{Configuration{ExpertActivations: "fp32"}, ""},
		{Configuration{ExpertActivations: "fp16"}, "expert activations fp16"},
		{Configuration{KV: "fp16", ExpertActivations: "fp16"}, "fp16, expert activations fp16"},
	} {
		if got := tc.cfg.variant(); got != tc.want {
			t.Errorf("%+v: variant %q, want %q", tc.cfg, got, tc.want)
		}
	}
}

// TestDenseActivationsColumn: the dense activations column follows the
// executor column (and the KV cache and expert activations columns, where
// there are ones) where some configuration records
// artifact.dense_activation_dtype (workers record FP16 only), reading FP32
// where a configuration records none; editions without FP16 dense
// activations keep their table.
func TestDenseActivationsColumn(t *testing.T) {
	base := withoutDTypes(loadConfigs(t, "smoke-cpu"))
	keys := func(docs []editions.ConfigDoc) []string {
		var out []string
		for _, f := range resultFields(docs) {
			out = append(out, f.Key)
		}
		return out
	}
	if slices.Contains(keys(base), "dense_activations") {
		t.Fatal("a dense activations column for documents without dense_activation_dtype")
	}
	docs := slices.Clone(base)
	docs[1].Artifact.DenseActivationDType = editions.ExpertActFP16
	ks := keys(docs)
	i := slices.Index(ks, "executor")
	if i < 0 || i+1 >= len(ks) || ks[i+1] != "dense_activations" {
		t.Fatalf("columns %v: want dense_activations right after executor", ks)
	}
	if slices.Contains(ks, "expert_activations") {
		t.Fatalf("columns %v: FP16 dense activations alone add an expert activations column", ks)
	}
	f := resultFields(docs)[i+1]
	if f.Header() != "dense activations" || f.Value(&docs[0]) != "FP32" || f.Value(&docs[1]) != "FP16" {
		t.Fatalf("column %q: %q, %q", f.Header(), f.Value(&docs[0]), f.Value(&docs[1]))
	}
	for i := range docs {
		docs[i].Artifact.KVDType = editions.KVFP32
	}
	docs[0].Artifact.ExpertActivationDType = editions.ExpertActFP16
	ks = keys(docs)
	if i := slices.Index(ks, "executor"); i < 0 || i+3 >= len(ks) || ks[i+1] != "kv_cache" || ks[i+2] != "expert_activations" || ks[i+3] != "dense_activations" {
		t.Fatalf("columns %v: want kv_cache, expert_activations, then dense_activations, right after executor", ks)
	}
}

// TestVariantDenseActivations: declared FP16 dense activations set a
// configuration's plot series apart, named so that they read as neither an
// FP16 KV cache nor FP16 expert activations; fp32 spelled out is the
// default.
func TestVariantDenseActivations(t *testing.T) {
	for _, tc := range []struct {
		cfg  Configuration
		want string
	}{
		{Configuration{DenseActivations: "fp32"}, ""},
		{Configuration{DenseActivations: "fp16"}, "dense activations fp16"},
		{Configuration{KV: "fp16", ExpertActivations: "fp16", DenseActivations: "fp16"}, "fp16, expert activations fp16, dense activations fp16"},
	} {
		if got := tc.cfg.variant(); got != tc.want {
			t.Errorf("%+v: variant %q, want %q", tc.cfg, got, tc.want)
		}
	}
}

// report.html's two results tables (speedKeys, resourceKeys) together
// show every results column, and only the configuration column twice, so
// the verifier can join them on it.
func TestSpeedAndResourcesCoverResults(t *testing.T) {
	all := append([]field(nil), configFields...)
	for _, u := range uncertaintyFields {
		all = append(all, u.field)
	}
	all = append(all, prefillField, policyField, kvField, expertActField, denseActField)
	for _, f := range all {
		inS, inR := slices.Contains(speedKeys, f.Key), slices.Contains(resourceKeys, f.Key)
		switch {
		case f.Key == "configuration" && !(inS && inR):
			t.Errorf("configuration must start both tables")
		case f.Key != "configuration" && inS == inR:
			t.Errorf("column %s is in %d of the two tables, want exactly 1", f.Key, map[bool]int{true: 1}[inS]+map[bool]int{true: 1}[inR])
		}
	}
	for _, keys := range [][]string{speedKeys, resourceKeys} {
		for _, k := range keys {
			if !slices.ContainsFunc(all, func(f field) bool { return f.Key == k }) {
				t.Errorf("table key %s names no results column", k)
			}
		}
	}
}
