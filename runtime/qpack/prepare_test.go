package qpack

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/half"
	"github.com/horizon-runmap/horizon/runtime/model"
)

// Synthetic checkpoints are made once per test binary and shared read-only.
var (
	synthRoot string
	synthMu   sync.Mutex
	synthDone = map[string]model.SynthResult{}
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "qpack-test-")
	if err != nil {
		panic(err)
	}
	synthRoot = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// synthCheckpoint returns the directory of a synthetic checkpoint of arch
// (seed 1) and its digest.
func synthCheckpoint(t *testing.T, arch string) (string, model.SynthResult) {
	t.Helper()
	synthMu.Lock()
	defer synthMu.Unlock()
	dir := filepath.Join(synthRoot, arch)
	if res, ok := synthDone[arch]; ok {
		return dir, res
	}
	res, err := model.Synthesize(model.SynthOptions{Arch: arch, Seed: 1, OutDir: dir})
	if err != nil {
		t.Fatalf("synthesize %s: %v", arch, err)
	}
	synthDone[arch] = res
	return dir, res
}

// copyDir makes a writable copy of a checkpoint.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func prepare(t *testing.T, ckpt string, scheme Scheme) (string, Report) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "art")
	var calls int
	var last, total int64
	rep, err := Prepare(PrepareOptions{Checkpoint: ckpt, Out: out, Scheme: scheme, Progress: func(done, tot int64) {
		if done < last {
			t.Errorf("progress went back from %d to %d", last, done)
		}
		calls++
		last, total = done, tot
	}})
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	if calls == 0 || last != total {
		t.Errorf("progress: %d calls, ended at %d of %d", calls, last, total)
	}
	return out, rep
}

func TestPrepare(t *testing.T) {
	cases := []struct {
		arch       string
		scheme     Scheme
		wantPadded map[string]int
	}{
		{"olmoe-tiny", SchemeInt4, map[string]int{}},
		{"qwen2moe-tiny", SchemeInt4, map[string]int{"down_proj": 512}},
		{"olmoe-tiny", SchemeFP16, map[string]int{}},
		{"qwen2moe-tiny", SchemeFP16, map[string]int{}},
	}
	for _, tc := range cases {
		t.Run(tc.arch+"/"+string(tc.scheme), func(t *testing.T) {
			ckptDir, synth := synthCheckpoint(t, tc.arch)
			out, rep := prepare(t, ckptDir, tc.scheme)

			a, err := Open(out)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Verify(); err != nil {
				t.Fatalf("Verify: %v", err)
			}
			cfg, err := a.Config()
			if err != nil {
				t.Fatal(err)
			}
			preset, _ := model.LookupPreset(tc.arch)
			if cfg.HiddenSize != preset.Config.HiddenSize || cfg.ExpertFFN != preset.Config.ExpertFFN {
				t.Errorf("config: %+v", cfg)
			}
			m := a.Meta
			layout, _ := NewRecordLayout(tc.scheme, cfg.HiddenSize, cfg.ExpertFFN)
			if a.Layout() != layout || rep.RecordBytes != layout.Size || rep.Records != cfg.NumLayers*cfg.NumExperts {
				t.Errorf("layout %+v, report %d x %d bytes", a.Layout(), rep.Records, rep.RecordBytes)
			}
			if m.Identity.Source.CheckpointSHA256 != synth.SHA256 {
				t.Errorf("checkpoint_sha256 %s, Synthesize says %s", m.Identity.Source.CheckpointSHA256, synth.SHA256)
			}
			var si model.SynthInfo
			if err := json.Unmarshal(m.Identity.Source.Synthetic, &si); err != nil || si.Arch != tc.arch {
				t.Errorf("identity.source.synthetic = %s (%v)", m.Identity.Source.Synthetic, err)
			}
			if m.Identity.Arch != cfg.ModelType || m.DTypes.OriginalDType != "BF16" || m.DTypes.RoutedScheme != tc.scheme {
				t.Errorf("identity/dtypes: %q %+v", m.Identity.Arch, m.DTypes)
			}
			if (m.DTypes.ScaleDType != nil) != (tc.scheme == SchemeInt4) {
				t.Errorf("scale_dtype %v for %s", m.DTypes.ScaleDType, tc.scheme)
			}
			if len(rep.PaddedColsPerMatrix) != len(tc.wantPadded) {
				t.Errorf("padded cols %v, want %v", rep.PaddedColsPerMatrix, tc.wantPadded)
			}
			for k, v := range tc.wantPadded {
				if rep.PaddedColsPerMatrix[k] != v {
					t.Errorf("padded cols %v, want %v", rep.PaddedColsPerMatrix, tc.wantPadded)
				}
			}
			if rep.ArtifactSHA256 != m.ArtifactSHA256 || m.Report.ArtifactSHA256 != m.ArtifactSHA256 {
				t.Errorf("artifact sha: report %s, meta %s", rep.ArtifactSHA256, m.ArtifactSHA256)
			}
			if rep.SaturatedNonRouted != 0 || rep.SaturatedRouted != 0 || rep.SaturatedScales != 0 {
				t.Errorf("unexpected saturation in a synthetic model: %+v", rep)
			}
			if tc.scheme == SchemeInt4 {
				nvals := int64(rep.Records) * int64(3*cfg.HiddenSize*cfg.ExpertFFN)
				if rep.Quant.Values != nvals || rep.Quant.MaxAbsErr <= 0 {
					t.Errorf("quant stats %+v (want %d values)", rep.Quant, nvals)
				}
			}
			for _, name := range []string{"config.json", "tokenizer.json", "generation_config.json", ExpertsFile, NonRoutedFile} {
				if _, ok := a.fileEntry(name); !ok {
					t.Errorf("artifact does not list %s", name)
				}
			}
			if len(m.Tensors) != len(cfg.TensorSpecs()) {
				t.Errorf("%d tensor entries, config has %d tensors", len(m.Tensors), len(cfg.TensorSpecs()))
			}

			experts := make([]byte, a.ExpertsBytes())
			sum, err := a.ReadExperts(experts)
			if err != nil {
				t.Fatal(err)
			}
			if fe, _ := a.fileEntry(ExpertsFile); sum != fe.SHA256 {
				t.Errorf("ReadExperts sha %s, listed %s", sum, fe.SHA256)
			}
			checkExperts(t, ckptDir, a, experts)
			checkNonRouted(t, ckptDir, a)
		})
	}
}

// checkExperts compares a few records with the checkpoint: exact for fp16,
// within s/2 of the stored scale for int4 (no clamping in a N(0, 0.02) model).
func checkExperts(t *testing.T, ckptDir string, a *Artifact, experts []byte) {
	t.Helper()
	ckpt, err := model.OpenCheckpoint(ckptDir)
	if err != nil {
		t.Fatal(err)
	}
	defer ckpt.Close()
	cfg := ckpt.Config
	l := a.Layout()
	for _, le := range [][2]int{{0, 0}, {0, cfg.NumExperts - 1}, {cfg.NumLayers - 1, 3}, {cfg.NumLayers - 1, cfg.NumExperts - 1}} {
		off := a.RecordOffset(le[0], le[1])
		rec := experts[off : off+int64(l.Size)]
		for i, m := range l.Matrices() {
			name := model.ExpertTensorName(le[0], le[1], model.ExpertProjs[i])
			want := make([]float32, m.Rows*m.Cols)
			if err := ckpt.ReadF32(name, want); err != nil {
				t.Fatal(err)
			}
			got := make([]float32, len(want))
			l.DecodeMatrix(got, rec, m)
			for j := range want {
				if l.Scheme == SchemeFP16 {
					if got[j] != want[j] {
						t.Fatalf("%s[%d] = %v, checkpoint %v (fp16 must be exact)", name, j, got[j], want[j])
					}
					continue
				}
				r, c := j/m.Cols, j%m.Cols
				s := half.F16ToF32(ScaleBits(rec[m.Offset:], m.Rows, m.Cols, r, c/BlockSize))
				if e := math.Abs(float64(got[j] - want[j])); e > float64(s)/2*(1+1e-6) {
					t.Fatalf("%s[%d,%d]: |%v - %v| = %g > s/2 (s = %g)", name, r, c, got[j], want[j], e, s)
				}
			}
		}
		// alignment padding is zero
		end := 0
		for _, m := range l.Matrices() {
			for _, b := range rec[end:m.Offset] {
				if b != 0 {
					t.Fatalf("record (%d,%d): non-zero alignment padding before offset %d", le[0], le[1], m.Offset)
				}
			}
			end = m.Offset + m.Bytes
		}
	}
	// Per-tensor entries point at the records.
	for _, te := range a.Meta.Tensors {
		if te.Kind != KindRouted {
			continue
		}
		if te.File != ExpertsFile || te.Stored != l.Scheme.StoredDType() || te.OriginalDType != "BF16" {
			t.Fatalf("routed tensor entry %+v", te)
		}
	}
}

func checkNonRouted(t *testing.T, ckptDir string, a *Artifact) {
	t.Helper()
	ckpt, err := model.OpenCheckpoint(ckptDir)
	if err != nil {
		t.Fatal(err)
	}
	defer ckpt.Close()
	nr, err := a.NonRouted()
	if err != nil {
		t.Fatal(err)
	}
	defer nr.Close()
	n := 0
	for _, spec := range ckpt.Config.TensorSpecs() {
		if spec.Kind != model.NonRouted {
			if _, _, err := nr.F16(spec.Name); err == nil {
				t.Fatalf("routed tensor %s found in %s", spec.Name, NonRoutedFile)
			}
			continue
		}
		n++
		data, shape, err := nr.F16(spec.Name)
		if err != nil {
			t.Fatal(err)
		}
		if len(shape) != len(spec.Shape) {
			t.Fatalf("%s: shape %v, want %v", spec.Name, shape, spec.Shape)
		}
		want := make([]float32, elements(spec.Shape))
		if err := ckpt.ReadF32(spec.Name, want); err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if half.F16ToF32(data[i]) != want[i] {
				t.Fatalf("%s[%d] = %v, checkpoint %v", spec.Name, i, half.F16ToF32(data[i]), want[i])
			}
		}
	}
	if len(nr.Names()) != n {
		t.Errorf("%s has %d tensors, want %d", NonRoutedFile, len(nr.Names()), n)
	}
	if _, _, err := nr.F16("no.such.tensor"); err == nil {
		t.Error("F16 of a missing tensor: no error")
	}
}

// TestPrepareDeterministic prepares the same checkpoint twice, with
// different core counts, and expects identical bytes.
func TestPrepareDeterministic(t *testing.T) {
	ckptDir, _ := synthCheckpoint(t, "qwen2moe-tiny")
	out1, rep1 := prepare(t, ckptDir, SchemeInt4)
	prev := runtime.GOMAXPROCS(1)
	out2, rep2 := prepare(t, ckptDir, SchemeInt4)
	runtime.GOMAXPROCS(prev)
	if rep1.ArtifactSHA256 != rep2.ArtifactSHA256 {
		t.Fatalf("artifact_sha256 differs: %s vs %s", rep1.ArtifactSHA256, rep2.ArtifactSHA256)
	}
	for _, f := range []string{MetaFile, ExpertsFile, NonRoutedFile} {
		b1, _ := os.ReadFile(filepath.Join(out1, f))
		b2, _ := os.ReadFile(filepath.Join(out2, f))
		if !bytes.Equal(b1, b2) {
			t.Errorf("%s differs between runs", f)
		}
	}
}

// patchBF16 overwrites element i of a tensor in the checkpoint's single
// model.safetensors with the BF16 bits v.
func patchBF16(t *testing.T, dir, tensor string, i int, v uint16) {
	t.Helper()
	path := filepath.Join(dir, "model.safetensors")
	start, offs, err := readSafetensorsOffsets(path)
	if err != nil {
		t.Fatal(err)
	}
	off, ok := offs[tensor]
	if !ok {
		t.Fatalf("no tensor %s in %s", tensor, path)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [2]byte
	binary.LittleEndian.PutUint16(b[:], v)
	if _, err := f.WriteAt(b[:], start+off[0]+int64(2*i)); err != nil {
		t.Fatal(err)
	}
}

func TestPrepareRejectsNonFinite(t *testing.T) {
	const bf16NaN, bf16NegInf = 0x7fc0, 0xff80
	cases := []struct {
		name    string
		tensor  string
		index   int
		bits    uint16
		scheme  Scheme
		wantMsg string
	}{
		{"NaN in routed int4", model.ExpertTensorName(2, 5, "up_proj"), 256*3 + 17, bf16NaN, SchemeInt4, "row 3 col 17"},
		{"-Inf in routed fp16", model.ExpertTensorName(1, 0, "down_proj"), 256 + 1, bf16NegInf, SchemeFP16, "row 1 col 1"},
		{"NaN in non-routed", "model.layers.3.self_attn.o_proj.weight", 2*256 + 9, bf16NaN, SchemeInt4, "index [2 9]"},
		{"NaN in a norm", "model.norm.weight", 7, bf16NaN, SchemeInt4, "index [7]"},
	}
	src, _ := synthCheckpoint(t, "olmoe-tiny")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, src)
			patchBF16(t, dir, tc.tensor, tc.index, tc.bits)
			parent := t.TempDir()
			out := filepath.Join(parent, "art")
			_, err := Prepare(PrepareOptions{Checkpoint: dir, Out: out, Scheme: tc.scheme})
			if err == nil {
				t.Fatal("Prepare accepted a non-finite weight")
			}
			if !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), tc.tensor) || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("err = %v; want ErrNonFinite naming %s and %q", err, tc.tensor, tc.wantMsg)
			}
			assertEmptyDir(t, parent)
		})
	}
}

func assertEmptyDir(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("left behind in %s: %s", dir, e.Name())
	}
}

func TestPrepareOutput(t *testing.T) {
	ckptDir, _ := synthCheckpoint(t, "olmoe-tiny")
	t.Run("non-empty output refused", func(t *testing.T) {
		out := t.TempDir()
		if err := os.WriteFile(filepath.Join(out, "keep"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Prepare(PrepareOptions{Checkpoint: ckptDir, Out: out})
		if !errors.Is(err, ErrOutputExists) {
			t.Fatalf("err = %v, want ErrOutputExists", err)
		}
		if b, _ := os.ReadFile(filepath.Join(out, "keep")); string(b) != "x" {
			t.Error("existing output was modified")
		}
	})
	t.Run("file as output refused", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "f")
		os.WriteFile(out, nil, 0o644)
		if _, err := Prepare(PrepareOptions{Checkpoint: ckptDir, Out: out}); err == nil {
			t.Fatal("no error")
		}
	})
	t.Run("empty output accepted", func(t *testing.T) {
		out := t.TempDir()
		rep, err := Prepare(PrepareOptions{Checkpoint: ckptDir, Out: out})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Scheme != SchemeInt4 {
			t.Errorf("default scheme %q", rep.Scheme)
		}
		assertOnlyArtifact(t, filepath.Dir(out), filepath.Base(out))
	})
	t.Run("bad scheme", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "art")
		if _, err := Prepare(PrepareOptions{Checkpoint: ckptDir, Out: out, Scheme: "int8"}); err == nil {
			t.Fatal("no error")
		}
	})
	t.Run("missing checkpoint", func(t *testing.T) {
		parent := t.TempDir()
		if _, err := Prepare(PrepareOptions{Checkpoint: filepath.Join(parent, "nope"), Out: filepath.Join(parent, "art")}); err == nil {
			t.Fatal("no error")
		}
		assertEmptyDir(t, parent)
	})
}

func assertOnlyArtifact(t *testing.T, parent, name string) {
	t.Helper()
	ents, _ := os.ReadDir(parent)
	for _, e := range ents {
		if e.Name() != name {
			t.Errorf("left behind in %s: %s", parent, e.Name())
		}
	}
}

// TestArtifactCorruption flips bytes and edits artifact.json and expects
// ReadExperts, Verify or Open to name the damage.
func TestArtifactCorruption(t *testing.T) {
	ckptDir, _ := synthCheckpoint(t, "qwen2moe-tiny")
	clean, _ := prepare(t, ckptDir, SchemeInt4)
	cases := []struct {
		name        string
		damage      func(t *testing.T, dir string)
		openErr     string // Open fails with this
		verifyErr   string // else Verify fails with this
		readExperts bool   // ReadExperts must fail too
	}{
		{name: "experts byte", damage: flipByte(ExpertsFile, 123457), verifyErr: "file experts.bin", readExperts: true},
		{name: "experts last byte", damage: flipByte(ExpertsFile, -1), verifyErr: "file experts.bin", readExperts: true},
		{name: "nonrouted byte", damage: flipByte(NonRoutedFile, -3), verifyErr: "file nonrouted.safetensors"},
		{name: "tokenizer byte", damage: flipByte("tokenizer.json", 0), verifyErr: "file tokenizer.json"},
		{name: "truncated experts", damage: func(t *testing.T, dir string) {
			os.Truncate(filepath.Join(dir, ExpertsFile), 1000)
		}, openErr: "experts.bin has 1000 bytes"},
		{name: "missing tokenizer", damage: func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "tokenizer.json"))
		}, openErr: "tokenizer.json"},
		{name: "tensor hash edited", damage: editMeta(func(m *ArtifactMeta) {
			m.Tensors[5].SHA256 = strings.Repeat("0", 64)
		}), verifyErr: "tensor model.layers.0.self_attn.q_proj.bias "},
		{name: "file hash edited", damage: editMeta(func(m *ArtifactMeta) {
			m.Files[0].SHA256 = strings.Repeat("0", 64)
		}), openErr: "artifact_sha256"},
		{name: "wrong version", damage: editMeta(func(m *ArtifactMeta) { m.Version = 2 }), openErr: "version 2"},
		{name: "layout edited", damage: editMeta(func(m *ArtifactMeta) { m.Experts.Layout.Down.ColsPadded = 352 }), openErr: "expert layout"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, clean)
			tc.damage(t, dir)
			a, err := Open(dir)
			if tc.openErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.openErr) {
					t.Fatalf("Open err = %v, want one containing %q", err, tc.openErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			err = a.Verify()
			if err == nil || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.verifyErr) {
				t.Errorf("Verify err = %v, want ErrCorrupt containing %q", err, tc.verifyErr)
			}
			_, err = a.ReadExperts(make([]byte, a.ExpertsBytes()))
			if tc.readExperts != (err != nil) {
				t.Errorf("ReadExperts err = %v, want error: %v", err, tc.readExperts)
			}
			if tc.readExperts && !errors.Is(err, ErrCorrupt) {
				t.Errorf("ReadExperts err = %v, want ErrCorrupt", err)
			}
		})
	}
	t.Run("not an artifact", func(t *testing.T) {
		if _, err := Open(t.TempDir()); err == nil || !strings.Contains(err.Error(), "prepare") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("wrong dst size", func(t *testing.T) {
		a, err := Open(clean)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.ReadExperts(make([]byte, 10)); err == nil {
			t.Fatal("no error")
		}
	})
}

func flipByte(file string, at int64) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) {
		t.Helper()
		f, err := os.OpenFile(filepath.Join(dir, file), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if at < 0 {
			st, _ := f.Stat()
			at += st.Size()
		}
		var b [1]byte
		if _, err := f.ReadAt(b[:], at); err != nil && err != io.EOF {
			t.Fatal(err)
		}
		b[0] ^= 0x10
		if _, err := f.WriteAt(b[:], at); err != nil {
			t.Fatal(err)
		}
	}
}

func editMeta(edit func(m *ArtifactMeta)) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) {
		t.Helper()
		path := filepath.Join(dir, MetaFile)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var m ArtifactMeta
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		edit(&m)
		b, _ = json.MarshalIndent(m, "", "  ")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
