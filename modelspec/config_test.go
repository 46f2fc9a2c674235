package modelspec

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestPublishedConfigs parses the published config.json files and checks
// they describe exactly the shapes our full-size presets synthesise.
func TestPublishedConfigs(t *testing.T) {
	cases := []struct{ file, preset string }{
		{"testdata/configs/olmoe-1b-7b-0924.json", "olmoe-1b-7b"},
		{"testdata/configs/qwen1.5-moe-a2.7b.json", "qwen15-moe-a27b"},
	}
	for _, c := range cases {
		t.Run(c.preset, func(t *testing.T) {
			b, err := os.ReadFile(c.file)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseConfig(b)
			if err != nil {
				t.Fatal(err)
			}
			p, err := LookupPreset(c.preset)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, p.Config) {
				t.Fatalf("published config parses to\n%+v\npreset is\n%+v", got, p.Config)
			}
		})
	}
}

// TestHFConfigRoundTrip: every preset's rendered config.json parses back to
// the same Config.
func TestHFConfigRoundTrip(t *testing.T) {
	for _, name := range PresetNames() {
		t.Run(name, func(t *testing.T) {
			p, _ := LookupPreset(name)
			b, err := json.Marshal(p.Config.HFConfig())
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseConfig(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, p.Config) {
				t.Fatalf("round trip\n%+v\nwant\n%+v", got, p.Config)
			}
		})
	}
}

func TestParseConfigErrors(t *testing.T) {
	base, err := os.ReadFile("testdata/configs/olmoe-1b-7b-0924.json")
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(m map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(base, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	cases := []struct {
		name        string
		json        []byte
		want        string
		unsupported bool
	}{
		{"not json", []byte("{"), "parse config.json", false},
		{"unknown model_type", edit(func(m map[string]any) { m["model_type"] = "mixtral" }), `model_type "mixtral"`, true},
		{"no model_type", edit(func(m map[string]any) { delete(m, "model_type") }), `missing required field "model_type"`, false},
		{"missing hidden_size", edit(func(m map[string]any) { delete(m, "hidden_size") }), `hidden_size`, false},
		{"missing two", edit(func(m map[string]any) { delete(m, "num_experts"); delete(m, "intermediate_size") }), `num_experts`, false},
		{"gelu", edit(func(m map[string]any) { m["hidden_act"] = "gelu" }), `hidden_act "gelu"`, true},
		{"rope scaling", edit(func(m map[string]any) { m["rope_scaling"] = map[string]any{"type": "linear", "factor": 2} }), "rope_scaling", true},
		{"clip_qkv", edit(func(m map[string]any) { m["clip_qkv"] = 8.0 }), "clip_qkv", true},
		{"top-k above experts", edit(func(m map[string]any) { m["num_experts_per_tok"] = 65 }), "num_experts_per_tok 65", false},
		{"heads do not divide", edit(func(m map[string]any) { m["num_attention_heads"] = 3 }), "not a multiple", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseConfig(c.json)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not mention %q", err, c.want)
			}
			if got := errors.Is(err, ErrUnsupported); got != c.unsupported {
				t.Fatalf("errors.Is(ErrUnsupported) = %v, want %v (%v)", got, c.unsupported, err)
			}
		})
	}
}

func TestQwenSpecificErrors(t *testing.T) {
	b, _ := os.ReadFile("testdata/configs/qwen1.5-moe-a2.7b.json")
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	for _, c := range []struct {
		field string
		value any
	}{{"decoder_sparse_step", 2}, {"mlp_only_layers", []int{0}}, {"use_sliding_window", true}} {
		mm := map[string]any{}
		for k, v := range m {
			mm[k] = v
		}
		mm[c.field] = c.value
		bb, _ := json.Marshal(mm)
		if _, err := ParseConfig(bb); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s=%v: err %v, want ErrUnsupported naming the field", c.field, c.value, err)
		}
	}
}

func TestTensorSpecsCounts(t *testing.T) {
	p, _ := LookupPreset("olmoe-1b-7b")
	var routed, params int64
	for _, s := range p.Config.TensorSpecs() {
		n := int64(1)
		for _, d := range s.Shape {
			n *= int64(d)
		}
		params += n
		if s.Kind == Routed {
			routed++
		}
	}
	if routed != 16*64*3 {
		t.Fatalf("routed tensors %d, want %d", routed, 16*64*3)
	}
	// OLMoE-1B-7B has 6.92B parameters.
	if params < 6_900_000_000 || params > 6_950_000_000 {
		t.Fatalf("olmoe-1b-7b has %d parameters, want ~6.92e9", params)
	}
	q, _ := LookupPreset("qwen15-moe-a27b")
	params = 0
	for _, s := range q.Config.TensorSpecs() {
		n := int64(1)
		for _, d := range s.Shape {
			n *= int64(d)
		}
		params += n
	}
	// Qwen1.5-MoE-A2.7B has 14.3B parameters.
	if params < 14_200_000_000 || params > 14_400_000_000 {
		t.Fatalf("qwen15-moe-a27b has %d parameters, want ~14.3e9", params)
	}
}
