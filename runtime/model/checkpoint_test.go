package model

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/nlpodyssey/safetensors"

	"github.com/horizon-runmap/horizon/runtime/half"
)

// microConfig is a minimal OLMoE used by the checkpoint-reading tests.
func microConfig() Config {
	return Config{
		Arch: OLMoE, ModelType: "olmoe", Architectures: []string{"OlmoeForCausalLM"},
		HiddenSize: 8, NumLayers: 1, NumHeads: 2, NumKVHeads: 2, VocabSize: 16,
		NumExperts: 2, TopK: 1, ExpertFFN: 4, RMSNormEps: 1e-5, RopeTheta: 10000,
		MaxPositions: 64, EOSTokenIDs: []int{15}, TorchDType: "bfloat16",
	}
}

// fixtureValue is element i of the test tensor with index k; every value is
// exact in BF16, FP16 and F32.
func fixtureValue(k, i int) float32 { return float32((i+k)%9-4) * 0.125 }

// fixtureTensor is one tensor of a hand-built checkpoint.
type fixtureTensor struct {
	name  string
	dtype safetensors.DType
	shape []uint64
	k     int // value offset, see fixtureValue
}

func encodeFixture(t *testing.T, ft fixtureTensor) safetensors.TensorView {
	t.Helper()
	n := 1
	for _, d := range ft.shape {
		n *= int(d)
	}
	var data []byte
	for i := range n {
		v := fixtureValue(ft.k, i)
		switch ft.dtype {
		case safetensors.BF16:
			data = binary.LittleEndian.AppendUint16(data, half.F32ToBF16(v))
		case safetensors.F16:
			data = binary.LittleEndian.AppendUint16(data, half.F32ToF16(v))
		case safetensors.F32:
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(v))
		case safetensors.F64:
			data = binary.LittleEndian.AppendUint64(data, math.Float64bits(float64(v)))
		default:
			t.Fatalf("fixture dtype %s", ft.dtype)
		}
	}
	tv, err := safetensors.NewTensorView(ft.dtype, ft.shape, data)
	if err != nil {
		t.Fatal(err)
	}
	return tv
}

// fixtureTensors lists every tensor of cfg, cycling through BF16, F16, F32.
func fixtureTensors(cfg Config) []fixtureTensor {
	dtypes := []safetensors.DType{safetensors.BF16, safetensors.F16, safetensors.F32}
	var out []fixtureTensor
	for k, s := range cfg.TensorSpecs() {
		shape := make([]uint64, len(s.Shape))
		for i, d := range s.Shape {
			shape[i] = uint64(d)
		}
		out = append(out, fixtureTensor{name: s.Name, dtype: dtypes[k%3], shape: shape, k: k})
	}
	return out
}

// writeFixture writes config.json and the tensors into dir, in nshards
// files (1: model.safetensors; more: an index and numbered shards).
func writeFixture(t *testing.T, dir string, configJSON []byte, tensors []fixtureTensor, nshards int) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), configJSON, 0o644); err != nil {
		t.Fatal(err)
	}
	meta := map[string]string{"format": "pt", "origin": "fixture"}
	if nshards == 1 {
		views := map[string]safetensors.TensorView{}
		for _, ft := range tensors {
			views[ft.name] = encodeFixture(t, ft)
		}
		writeSafetensors(t, filepath.Join(dir, "model.safetensors"), views, meta)
		return
	}
	weightMap := map[string]string{}
	for s := range nshards {
		file := filepath.Join(dir, shardName(s, nshards))
		views := map[string]safetensors.TensorView{}
		for i, ft := range tensors {
			if i%nshards == s {
				views[ft.name] = encodeFixture(t, ft)
				weightMap[ft.name] = shardName(s, nshards)
			}
		}
		writeSafetensors(t, file, views, meta)
	}
	idx, err := json.Marshal(map[string]any{"metadata": map[string]any{}, "weight_map": weightMap})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), idx, 0o644); err != nil {
		t.Fatal(err)
	}
}

func shardName(i, n int) string {
	return "model-0000" + string(rune('1'+i)) + "-of-0000" + string(rune('0'+n)) + ".safetensors"
}

func writeSafetensors(t *testing.T, path string, views map[string]safetensors.TensorView, meta map[string]string) {
	t.Helper()
	b, err := safetensors.Serialize(views, meta)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func microConfigJSON(t *testing.T) []byte {
	t.Helper()
	b, err := json.Marshal(microConfig().HFConfig())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestOpenCheckpointDecodes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		nshards int
		files   []string
	}{
		{"single", 1, []string{"model.safetensors"}},
		{"sharded", 3, []string{"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tensors := fixtureTensors(microConfig())
			writeFixture(t, dir, microConfigJSON(t), tensors, tc.nshards)
			c, err := OpenCheckpoint(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if got := c.Files(); !reflect.DeepEqual(got, tc.files) {
				t.Errorf("Files() = %v, want %v", got, tc.files)
			}
			if got := c.Metadata()["origin"]; got != "fixture" {
				t.Errorf("Metadata()[origin] = %q", got)
			}
			if c.Config.HiddenSize != 8 {
				t.Errorf("Config.HiddenSize = %d", c.Config.HiddenSize)
			}
			seen := map[string]bool{}
			for _, ft := range tensors {
				dt, err := c.DType(ft.name)
				if err != nil || dt != ft.dtype.String() {
					t.Fatalf("DType(%s) = %q, %v; want %s", ft.name, dt, err, ft.dtype)
				}
				seen[dt] = true
				shape, err := c.Shape(ft.name)
				if err != nil {
					t.Fatal(err)
				}
				n := 1
				for i, d := range shape {
					if uint64(d) != ft.shape[i] {
						t.Fatalf("Shape(%s) = %v, want %v", ft.name, shape, ft.shape)
					}
					n *= d
				}
				dst := make([]float32, n)
				if err := c.ReadF32(ft.name, dst); err != nil {
					t.Fatal(err)
				}
				for i, v := range dst {
					if want := fixtureValue(ft.k, i); v != want {
						t.Fatalf("%s (%s) [%d] = %v, want %v", ft.name, dt, i, v, want)
					}
				}
			}
			if len(seen) != 3 {
				t.Errorf("fixture covered dtypes %v, want BF16, F16 and F32", seen)
			}
			name := tensors[0].name
			if err := c.ReadF32(name, make([]float32, 3)); err == nil || !strings.Contains(err.Error(), "elements") {
				t.Errorf("ReadF32 with a short dst: err = %v", err)
			}
			if _, err := c.Shape("no.such.tensor"); err == nil {
				t.Error("Shape of an unknown tensor: no error")
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestOpenCheckpointRejects(t *testing.T) {
	cfgJSON := func(t *testing.T) []byte { return microConfigJSON(t) }
	q := LayerTensorName(0, "self_attn.q_proj.weight")
	for _, tc := range []struct {
		name    string
		nshards int
		config  func(t *testing.T) []byte
		edit    func([]fixtureTensor) []fixtureTensor
		after   func(t *testing.T, dir string)
		want    []string // substrings of the error
	}{
		{
			name: "unknown model_type", nshards: 1,
			config: func(t *testing.T) []byte {
				return []byte(strings.Replace(string(microConfigJSON(t)), `"olmoe"`, `"mixtral"`, 1))
			},
			want: []string{"config.json", `"mixtral"`, "unsupported"},
		},
		{
			name: "missing tensor", nshards: 1,
			edit: func(ts []fixtureTensor) []fixtureTensor {
				var out []fixtureTensor
				for _, ft := range ts {
					if ft.name != q {
						out = append(out, ft)
					}
				}
				return out
			},
			want: []string{"missing tensor", q},
		},
		{
			name: "wrong shape", nshards: 1,
			edit: func(ts []fixtureTensor) []fixtureTensor {
				for i := range ts {
					if ts[i].name == q {
						ts[i].shape = []uint64{4, 16}
					}
				}
				return ts
			},
			want: []string{"model.safetensors", q, "[4 16]", "want [8 8]"},
		},
		{
			name: "unsupported dtype", nshards: 2,
			edit: func(ts []fixtureTensor) []fixtureTensor {
				for i := range ts {
					if ts[i].name == q {
						ts[i].dtype = safetensors.F64
					}
				}
				return ts
			},
			want: []string{q, "unsupported dtype F64"},
		},
		{
			name: "missing shard file", nshards: 3,
			after: func(t *testing.T, dir string) {
				if err := os.Remove(filepath.Join(dir, "model-00002-of-00003.safetensors")); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"missing shard file model-00002-of-00003.safetensors"},
		},
		{
			name: "truncated data", nshards: 1,
			after: func(t *testing.T, dir string) { truncateBy(t, filepath.Join(dir, "model.safetensors"), 3) },
			want:  []string{"truncated safetensors file model.safetensors", "tensor data"},
		},
		{
			name: "truncated header", nshards: 2,
			after: func(t *testing.T, dir string) {
				p := filepath.Join(dir, "model-00001-of-00002.safetensors")
				if err := os.Truncate(p, 20); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"truncated safetensors file model-00001-of-00002.safetensors", "header"},
		},
		{
			name: "empty file", nshards: 1,
			after: func(t *testing.T, dir string) {
				if err := os.Truncate(filepath.Join(dir, "model.safetensors"), 0); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"truncated safetensors file model.safetensors"},
		},
		{
			name: "no weights", nshards: 1,
			after: func(t *testing.T, dir string) {
				if err := os.Remove(filepath.Join(dir, "model.safetensors")); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"no model.safetensors"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tensors := fixtureTensors(microConfig())
			if tc.edit != nil {
				tensors = tc.edit(tensors)
			}
			conf := cfgJSON
			if tc.config != nil {
				conf = tc.config
			}
			writeFixture(t, dir, conf(t), tensors, tc.nshards)
			if tc.after != nil {
				tc.after(t, dir)
			}
			c, err := OpenCheckpoint(dir)
			if err == nil {
				c.Close()
				t.Fatal("OpenCheckpoint succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func truncateBy(t *testing.T, path string, n int64) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, st.Size()-n); err != nil {
		t.Fatal(err)
	}
}
