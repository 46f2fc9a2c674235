package model

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/half"
)

func synthForTest(t *testing.T, o SynthOptions) SynthResult {
	t.Helper()
	res, err := Synthesize(o)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// digestOnDisk recomputes a FileDigest by reading the file back.
func digestOnDisk(t *testing.T, dir, path string) FileDigest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, path))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return FileDigest{Path: path, Bytes: int64(len(b)), SHA256: hex.EncodeToString(sum[:])}
}

func TestSynthesizeDeterministic(t *testing.T) {
	root := t.TempDir()
	a := synthForTest(t, SynthOptions{Arch: "olmoe-tiny", Seed: 7, OutDir: filepath.Join(root, "a")})
	b := synthForTest(t, SynthOptions{Arch: "olmoe-tiny", Seed: 7, OutDir: filepath.Join(root, "b")})
	c := synthForTest(t, SynthOptions{Arch: "olmoe-tiny", Seed: 8, OutDir: filepath.Join(root, "c")})

	wantFiles := []string{"config.json", "generation_config.json", "horizon-synth.json", "model.safetensors", "tokenizer.json"}
	var got []string
	for _, f := range a.Files {
		got = append(got, f.Path)
		// The digests computed while writing match the files on disk, and
		// the two same-seed checkpoints are byte-identical.
		if d := digestOnDisk(t, filepath.Join(root, "a"), f.Path); d != f {
			t.Errorf("digest of %s while writing %+v, on disk %+v", f.Path, f, d)
		}
		ab, _ := os.ReadFile(filepath.Join(root, "a", f.Path))
		bb, _ := os.ReadFile(filepath.Join(root, "b", f.Path))
		if !bytes.Equal(ab, bb) {
			t.Errorf("%s differs between two syntheses with the same seed", f.Path)
		}
	}
	if !reflect.DeepEqual(got, wantFiles) {
		t.Errorf("files %v, want %v", got, wantFiles)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("same seed, different results:\n%+v\n%+v", a, b)
	}
	if a.SHA256 == c.SHA256 {
		t.Error("different seeds give the same checkpoint digest")
	}
	for i := range a.Files {
		same := a.Files[i].SHA256 == c.Files[i].SHA256
		if wantSame := a.Files[i].Path != "model.safetensors" && a.Files[i].Path != "horizon-synth.json"; same != wantSame {
			t.Errorf("%s: same digest across seeds = %v, want %v", a.Files[i].Path, same, wantSame)
		}
	}

	// The checkpoint digest is sha256sum's listing of the files.
	var lines strings.Builder
	for _, f := range a.Files {
		lines.WriteString(f.SHA256 + "  " + f.Path + "\n")
	}
	if sum := sha256.Sum256([]byte(lines.String())); hex.EncodeToString(sum[:]) != a.SHA256 {
		t.Errorf("checkpoint SHA256 %s does not hash the file list", a.SHA256)
	}
	if entries, _ := os.ReadDir(root); len(entries) != 3 {
		t.Errorf("output parent holds %d entries, want 3 (temporary directories left?)", len(entries))
	}
}

func TestSynthesizeReadBack(t *testing.T) {
	for _, arch := range []string{"olmoe-tiny", "qwen2moe-tiny"} {
		t.Run(arch, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "ckpt")
			var last, total int64
			synthForTest(t, SynthOptions{Arch: arch, Seed: 3, OutDir: dir,
				Progress: func(done, tot int64) { last, total = done, tot }})
			c, err := OpenCheckpoint(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			preset, _ := LookupPreset(arch)
			if !reflect.DeepEqual(c.Config, preset.Config) {
				t.Errorf("config.json reads back as %+v, want %+v", c.Config, preset.Config)
			}
			md := c.Metadata()
			if md["arch"] != arch || md["seed"] != "3" || md["init"] != SynthInit || md["format"] != "pt" {
				t.Errorf("safetensors metadata %v", md)
			}
			info, err := LoadSynthInfo(dir)
			if err != nil {
				t.Fatal(err)
			}
			specs := preset.Config.TensorSpecs()
			if info.Arch != arch || info.Seed != 3 || info.TensorCount != len(specs) || info.TensorBytes != total || info.Format != SynthFormat {
				t.Errorf("horizon-synth.json %+v", info)
			}
			if last != total || total == 0 {
				t.Errorf("progress ended at %d of %d", last, total)
			}
			var gen map[string]any
			b, _ := os.ReadFile(filepath.Join(dir, "generation_config.json"))
			if err := json.Unmarshal(b, &gen); err != nil || gen["eos_token_id"] != float64(preset.Config.EOSTokenIDs[0]) {
				t.Errorf("generation_config.json %s (%v)", b, err)
			}

			var sum, sumSq float64
			var count, zeros int
			for _, s := range specs {
				dt, _ := c.DType(s.Name)
				if dt != "BF16" {
					t.Fatalf("%s has dtype %s", s.Name, dt)
				}
				vals := make([]float32, numElements(s.Shape))
				if err := c.ReadF32(s.Name, vals); err != nil {
					t.Fatal(err)
				}
				if s.Init == "ones" {
					for _, v := range vals {
						if v != 1 {
							t.Fatalf("%s: norm weight %v, want 1", s.Name, v)
						}
					}
					continue
				}
				for i, v := range vals {
					// Exactly representable in FP16, and no BF16 value FP16
					// could only store as a subnormal.
					if back := half.F16ToF32(half.F32ToF16(v)); back != v || math.Signbit(float64(v)) && v == 0 {
						t.Fatalf("%s[%d] = %v is not exact in FP16 (-> %v)", s.Name, i, v, back)
					}
					if v != 0 && math.Abs(float64(v)) < 0x1p-14 {
						t.Fatalf("%s[%d] = %v is below 2^-14 and not flushed", s.Name, i, v)
					}
					z := float64(v) / synthStd(&s)
					sum += z
					sumSq += z * z
					if v == 0 {
						zeros++
					}
				}
				count += len(vals)
			}
			mean, std := sum/float64(count), math.Sqrt(sumSq/float64(count))
			// Values divided by their tensor's declared std are N(0, 1).
			if math.Abs(mean) > 2e-3 || math.Abs(std-1) > 1e-2 {
				t.Errorf("normalised values: mean %g, std %g over %d values; want 0, 1", mean, std, count)
			}
			// P(|x| < 2^-14) is 0.08% at std 0.0625 and 0.24% at std 0.02.
			if frac := float64(zeros) / float64(count); frac < 0.0003 || frac > 0.005 {
				t.Errorf("flushed fraction %g", frac)
			}

			// A multi-chunk tensor and a small one agree with SynthTensor.
			for _, name := range []string{LayerTensorName(1, "self_attn.k_proj.weight"), ExpertTensorName(3, 5, "down_proj")} {
				want, err := SynthTensor(arch, 3, name)
				if err != nil {
					t.Fatal(err)
				}
				got := make([]float32, len(want))
				if err := c.ReadF32(name, got); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s: read back differs from SynthTensor", name)
				}
			}
		})
	}
}

func TestSynthChunkStreams(t *testing.T) {
	// The embedding of olmoe-1b-7b spans many chunks; its second chunk must
	// not repeat the first.
	s := TensorSpec{Name: "model.embed_tokens.weight", Shape: []int{50304, 2048}, Init: "normal"}
	a, b := make([]byte, 64), make([]byte, 64)
	synthChunk(a, 1, &s, 0)
	synthChunk(b, 1, &s, 1)
	if bytes.Equal(a, b) {
		t.Error("chunks 0 and 1 share a stream")
	}
	synthChunk(b, 1, &s, 0)
	if !bytes.Equal(a, b) {
		t.Error("chunk 0 is not reproducible")
	}
}

func TestSynthesizeSharded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ckpt")
	const limit = 3 << 20
	res := synthForTest(t, SynthOptions{Arch: "qwen2moe-tiny", Seed: 11, OutDir: dir, ShardBytes: limit})
	preset, _ := LookupPreset("qwen2moe-tiny")
	plans := planShards(preset.Config.TensorSpecs(), limit)
	if len(plans) < 3 {
		t.Fatalf("only %d shards at %d bytes", len(plans), limit)
	}
	c, err := OpenCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var shardFiles []string
	for _, f := range res.Files {
		if strings.HasSuffix(f.Path, ".safetensors") {
			shardFiles = append(shardFiles, f.Path)
			if f.Bytes > limit+64<<10 {
				t.Errorf("%s holds %d bytes, limit %d", f.Path, f.Bytes, limit)
			}
		}
		if d := digestOnDisk(t, dir, f.Path); d != f {
			t.Errorf("digest of %s while writing %+v, on disk %+v", f.Path, f, d)
		}
	}
	if !reflect.DeepEqual(c.Files(), shardFiles) || shardFiles[0] != fmt.Sprintf("model-00001-of-%05d.safetensors", len(plans)) {
		t.Errorf("Files() %v, result files %v", c.Files(), shardFiles)
	}
	if _, err := os.Stat(filepath.Join(dir, "model.safetensors")); !errors.Is(err, os.ErrNotExist) {
		t.Error("sharded checkpoint also has model.safetensors")
	}
	// Sharding does not change the values.
	name := ExpertTensorName(2, 9, "gate_proj")
	want, _ := SynthTensor("qwen2moe-tiny", 11, name)
	got := make([]float32, len(want))
	if err := c.ReadF32(name, got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s differs in the sharded checkpoint", name)
	}
	var index struct {
		Metadata  map[string]int64  `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}
	b, _ := os.ReadFile(filepath.Join(dir, "model.safetensors.index.json"))
	if err := json.Unmarshal(b, &index); err != nil {
		t.Fatal(err)
	}
	info, _ := LoadSynthInfo(dir)
	if index.Metadata["total_size"] != info.TensorBytes || len(index.WeightMap) != info.TensorCount {
		t.Errorf("index metadata %v with %d tensors; synth info %+v", index.Metadata, len(index.WeightMap), info)
	}
}

func TestSynthesizeRefuses(t *testing.T) {
	root := t.TempDir()
	full := filepath.Join(root, "full")
	if err := os.MkdirAll(full, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(full, "keep.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		o    SynthOptions
		want string
	}{
		{"non-empty dir", SynthOptions{Arch: "olmoe-tiny", OutDir: full}, "not empty"},
		{"a file", SynthOptions{Arch: "olmoe-tiny", OutDir: file}, "not a directory"},
		{"unknown arch", SynthOptions{Arch: "gpt-5", OutDir: filepath.Join(root, "x")}, "unknown architecture"},
		{"no out dir", SynthOptions{Arch: "olmoe-tiny"}, "no output directory"},
		{"negative shard size", SynthOptions{Arch: "olmoe-tiny", OutDir: filepath.Join(root, "y"), ShardBytes: -1}, "negative"},
		{"cancelled", SynthOptions{Arch: "olmoe-tiny", OutDir: filepath.Join(root, "z"), Ctx: cancelled}, "canceled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Synthesize(tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
	// Nothing was created or left behind.
	entries, _ := os.ReadDir(root)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !reflect.DeepEqual(names, []string{"file", "full"}) {
		t.Errorf("root holds %v after refusals", names)
	}
	if b, _ := os.ReadFile(filepath.Join(full, "keep.txt")); string(b) != "x" {
		t.Error("the non-empty directory was modified")
	}

	// An existing empty directory is accepted.
	empty := filepath.Join(root, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	synthForTest(t, SynthOptions{Arch: "olmoe-tiny", Seed: 1, OutDir: empty})
	if _, err := os.Stat(filepath.Join(empty, "model.safetensors")); err != nil {
		t.Error(err)
	}
}
