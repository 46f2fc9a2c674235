package qpack

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"unsafe"

	"github.com/nlpodyssey/safetensors"
	"golang.org/x/sys/unix"

	"github.com/horizon-runmap/horizon/runtime/model"
)

// An artifact is a directory that prepare writes once and the runtime only
// reads:
//
//	artifact.json           identity, dtypes, expert layout, every file and
//	                        tensor with its SHA-256, the preparation report
//	experts.bin             routed-expert records, [layer][expert], each
//	                        RecordLayout.Size bytes (see RecordLayout)
//	nonrouted.safetensors   every other tensor, FP16, HF names and shapes
//	config.json, tokenizer.json, ...   copied from the checkpoint
//
// experts.bin:
//
//	offset 0                      RecordOffset(l, e) = (l*E + e) * Size
//	+-----------+-----------+-----+-------------+-----+---------------+
//	| L0 E0     | L0 E1     | ... | L0 E(E-1)   | ... | L(L-1) E(E-1) |
//	+-----------+-----------+-----+-------------+-----+---------------+
//
// The artifact's identity is ArtifactSHA256: the SHA-256 of the lines
// "<sha256>  <path>\n" of Meta.Files sorted by path (the format of
// sha256sum), so it covers every file except artifact.json itself.
const (
	// ArtifactSchema and ArtifactVersion identify artifact.json.
	ArtifactSchema  = "horizon.artifact"
	ArtifactVersion = 1

	// File names inside an artifact directory.
	MetaFile      = "artifact.json"
	ExpertsFile   = "experts.bin"
	NonRoutedFile = "nonrouted.safetensors"

	// Record order of experts.bin.
	ExpertOrder = "[layer][expert]"
)

// Tensor kinds of TensorEntry.Kind.
const (
	KindRouted    = "routed"
	KindNonRouted = "nonrouted"
)

// Dtype names used in artifact.json.
const (
	DTypeFP16 = "FP16"
	DTypeFP32 = "FP32"
)

// ErrCorrupt marks an artifact whose files do not match artifact.json.
var ErrCorrupt = errors.New("artifact does not match artifact.json")

// ArtifactMeta is artifact.json.
type ArtifactMeta struct {
	Schema         string        `json:"schema"`
	Version        int           `json:"version"`
	Identity       Identity      `json:"identity"`
	DTypes         DTypes        `json:"dtypes"`
	Experts        ExpertsMeta   `json:"experts"`
	Files          []FileEntry   `json:"files"`
	Tensors        []TensorEntry `json:"tensors"`
	Report         Report        `json:"report"`
	ArtifactSHA256 string        `json:"artifact_sha256"`
}

// Identity says what the artifact was prepared from.
type Identity struct {
	// Arch is the checkpoint's model_type ("olmoe", "qwen2_moe").
	Arch   string         `json:"arch"`
	Source SourceIdentity `json:"source"`
	// Config is the checkpoint's config.json as an object.
	Config json.RawMessage `json:"config"`
}

// SourceIdentity identifies the checkpoint.
type SourceIdentity struct {
	Dir string `json:"dir"`
	// CheckpointSHA256 is the SHA-256 of the lines "<sha256>  <name>\n",
	// sorted by name, of the checkpoint's files (see CheckpointSHA256).
	CheckpointSHA256 string `json:"checkpoint_sha256"`
	// Synthetic is the checkpoint's horizon-synth.json, or null for a real
	// checkpoint.
	Synthetic json.RawMessage `json:"synthetic"`
}

// DTypes are the artifact-wide dtype fields, kept separate on purpose: what
// the checkpoint held, how it is stored, and what the kernels compute in.
type DTypes struct {
	// OriginalDType is the checkpoint dtype ("BF16", "F16", "F32"), or
	// "MIXED" when tensors differ (each TensorEntry has its own).
	OriginalDType  string  `json:"original_dtype"`
	RoutedScheme   Scheme  `json:"routed_scheme"`
	ScaleDType     *string `json:"scale_dtype"` // "FP16" for int4, null for fp16
	NonRoutedDType string  `json:"nonrouted_dtype"`
	// ActivationDType is the activation type the stored format is designed
	// for (W4A16: FP16). A measurement records what its backend actually
	// computed in (backend.Backend.ActivationDType), which may differ: the
	// CPU and CUDA backends keep activations in FP32 today.
	ActivationDType   string `json:"activation_dtype"`
	AccumulationDType string `json:"accumulation_dtype"`
}

// ExpertsMeta describes experts.bin.
type ExpertsMeta struct {
	File            string       `json:"file"`
	Layers          int          `json:"layers"`
	ExpertsPerLayer int          `json:"experts_per_layer"`
	RecordBytes     int          `json:"record_bytes"`
	Bytes           int64        `json:"bytes"`
	Layout          RecordLayout `json:"layout"`
	Order           string       `json:"order"`
}

// FileEntry is one file of the artifact.
type FileEntry struct {
	Path   string `json:"path"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// TensorEntry is one checkpoint tensor as stored in the artifact.
type TensorEntry struct {
	Name              string  `json:"name"`
	Kind              string  `json:"kind"` // KindRouted or KindNonRouted
	Shape             []int   `json:"shape"`
	OriginalDType     string  `json:"original_dtype"`
	Stored            string  `json:"stored"`      // "qpack-int4-b256-v1" or "FP16"
	ScaleDType        *string `json:"scale_dtype"` // "FP16" for int4, null otherwise
	ActivationDType   string  `json:"activation_dtype"`
	AccumulationDType string  `json:"accumulation_dtype"`
	File              string  `json:"file"`
	Offset            int64   `json:"offset"` // byte offset in File
	Bytes             int64   `json:"bytes"`  // stored bytes (no alignment padding)
	SHA256            string  `json:"sha256"` // of the stored bytes
	ColsPadded        int     `json:"cols_padded,omitempty"`
}

// Report is the preparation report (also artifact.json "report").
type Report struct {
	Scheme      Scheme `json:"scheme"`
	RecordBytes int    `json:"record_bytes"`
	Records     int    `json:"records"`
	ExpertBytes int64  `json:"expert_bytes"`
	// NonRoutedBytes is the size of the FP16 tensor data (headers excluded).
	NonRoutedBytes int64 `json:"nonrouted_bytes"`
	// SaturatedNonRouted counts non-routed values beyond the FP16 range
	// stored as ±65504.
	SaturatedNonRouted int64 `json:"saturated_nonrouted"`
	// SaturatedRouted is the same for routed weights with the fp16 scheme.
	SaturatedRouted int64 `json:"saturated_routed"`
	// SaturatedScales counts INT4 block scales stored as 65504 (= Quant.SaturatedScales).
	SaturatedScales int64 `json:"saturated_scales"`
	// Quant totals every routed matrix (int4 only).
	Quant QuantStats `json:"quant"`
	// PaddedColsPerMatrix maps each matrix whose columns were padded to its
	// stored width, e.g. "down_proj": 512 for 352 columns. Empty when no
	// matrix needed padding.
	PaddedColsPerMatrix map[string]int `json:"padded_cols_per_matrix"`
	ArtifactSHA256      string         `json:"artifact_sha256"`
}

// Artifact is an opened artifact directory.
type Artifact struct {
	Dir  string
	Meta ArtifactMeta
}

// Open parses dir/artifact.json, checks its schema, version and internal
// consistency, and checks that every listed file exists with its listed
// size. It does not hash (see Verify and ReadExperts).
func Open(dir string) (*Artifact, error) {
	path := filepath.Join(dir, MetaFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("open artifact %s: no %s (is this a prepared artifact? run horizon-bench prepare)", dir, MetaFile)
	} else if err != nil {
		return nil, fmt.Errorf("open artifact: %w", err)
	}
	a := &Artifact{Dir: dir}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a.Meta); err != nil {
		return nil, fmt.Errorf("open artifact %s: %w", path, err)
	}
	if err := a.check(); err != nil {
		return nil, fmt.Errorf("open artifact %s: %w", dir, err)
	}
	return a, nil
}

// check validates artifact.json against itself and the directory listing.
func (a *Artifact) check() error {
	m := &a.Meta
	if m.Schema != ArtifactSchema || m.Version != ArtifactVersion {
		return fmt.Errorf("%s has schema %q version %d, want %q version %d", MetaFile, m.Schema, m.Version, ArtifactSchema, ArtifactVersion)
	}
	cfg, err := a.Config()
	if err != nil {
		return err
	}
	if !m.DTypes.RoutedScheme.Valid() {
		return fmt.Errorf("%s: unknown routed_scheme %q", MetaFile, m.DTypes.RoutedScheme)
	}
	want, err := NewRecordLayout(m.DTypes.RoutedScheme, cfg.HiddenSize, cfg.ExpertFFN)
	if err != nil {
		return err
	}
	e := m.Experts
	switch {
	case e.Layout != want:
		return fmt.Errorf("%s: expert layout %+v does not match %s for hidden %d, ffn %d (%+v)", MetaFile, e.Layout, want.Scheme, cfg.HiddenSize, cfg.ExpertFFN, want)
	case e.Layers != cfg.NumLayers || e.ExpertsPerLayer != cfg.NumExperts:
		return fmt.Errorf("%s: experts %d x %d, config says %d layers x %d experts", MetaFile, e.Layers, e.ExpertsPerLayer, cfg.NumLayers, cfg.NumExperts)
	case e.RecordBytes != want.Size || e.Bytes != int64(e.Layers)*int64(e.ExpertsPerLayer)*int64(want.Size):
		return fmt.Errorf("%s: experts record_bytes %d / bytes %d inconsistent with the layout (%d-byte records)", MetaFile, e.RecordBytes, e.Bytes, want.Size)
	case e.Order != ExpertOrder:
		return fmt.Errorf("%s: experts order %q, want %q", MetaFile, e.Order, ExpertOrder)
	}
	if got := filesSHA256(m.Files); got != m.ArtifactSHA256 {
		return fmt.Errorf("%s: artifact_sha256 %s does not match its file list (%s): %w", MetaFile, m.ArtifactSHA256, got, ErrCorrupt)
	}
	listed := map[string]int64{}
	for _, f := range m.Files {
		if !localName(f.Path) {
			return fmt.Errorf("%s: file path %q is not a plain name inside the artifact", MetaFile, f.Path)
		}
		st, err := os.Stat(filepath.Join(a.Dir, f.Path))
		if err != nil {
			return fmt.Errorf("listed file %s: %w", f.Path, err)
		}
		if st.Size() != f.Bytes {
			return fmt.Errorf("file %s has %d bytes, %s lists %d: %w", f.Path, st.Size(), MetaFile, f.Bytes, ErrCorrupt)
		}
		listed[f.Path] = f.Bytes
	}
	if n, ok := listed[e.File]; !ok || n != e.Bytes {
		return fmt.Errorf("%s: experts file %q (%d bytes) is not in the file list with that size", MetaFile, e.File, e.Bytes)
	}
	for _, t := range m.Tensors {
		n, ok := listed[t.File]
		if !ok || t.Offset < 0 || t.Bytes < 0 || t.Offset+t.Bytes > n {
			return fmt.Errorf("%s: tensor %q at [%d, %d) of %q lies outside the listed files", MetaFile, t.Name, t.Offset, t.Offset+t.Bytes, t.File)
		}
	}
	return nil
}

// localName reports whether p names a file directly inside the artifact.
func localName(p string) bool {
	return p != "" && p != "." && p != ".." && !strings.ContainsAny(p, `/\`)
}

// Config parses the embedded config.json.
func (a *Artifact) Config() (model.Config, error) {
	cfg, err := model.ParseConfig(a.Meta.Identity.Config)
	if err != nil {
		return model.Config{}, fmt.Errorf("%s identity.config: %w", MetaFile, err)
	}
	return cfg, nil
}

// Layout is the expert record layout.
func (a *Artifact) Layout() RecordLayout { return a.Meta.Experts.Layout }

// Scheme is how routed experts are stored.
func (a *Artifact) Scheme() Scheme { return a.Meta.DTypes.RoutedScheme }

// ExpertsBytes is the size of experts.bin.
func (a *Artifact) ExpertsBytes() int64 { return a.Meta.Experts.Bytes }

// RecordOffset is the byte offset of the record of (layer, expert) in
// experts.bin.
func (a *Artifact) RecordOffset(layer, expert int) int64 {
	e := a.Meta.Experts
	return (int64(layer)*int64(e.ExpertsPerLayer) + int64(expert)) * int64(e.RecordBytes)
}

// fileEntry returns the listed entry for path.
func (a *Artifact) fileEntry(path string) (FileEntry, bool) {
	for _, f := range a.Meta.Files {
		if f.Path == path {
			return f, true
		}
	}
	return FileEntry{}, false
}

// readChunk bounds each read of ReadExperts so hashing overlaps I/O in
// cache-friendly pieces.
const readChunk = 8 << 20

// ReadExperts reads all of experts.bin into dst (len(dst) must equal
// ExpertsBytes), hashing while it reads, and returns the hex SHA-256. It
// fails (wrapping ErrCorrupt) when the hash or size differs from
// artifact.json. The file is closed before it returns.
func (a *Artifact) ReadExperts(dst []byte) (string, error) {
	want, ok := a.fileEntry(a.Meta.Experts.File)
	if !ok {
		return "", fmt.Errorf("artifact %s: %s is not listed", a.Dir, a.Meta.Experts.File)
	}
	if int64(len(dst)) != a.ExpertsBytes() {
		return "", fmt.Errorf("read experts: dst has %d bytes, experts.bin has %d", len(dst), a.ExpertsBytes())
	}
	f, err := os.Open(filepath.Join(a.Dir, want.Path))
	if err != nil {
		return "", fmt.Errorf("read experts: %w", err)
	}
	defer f.Close()
	// Reading and hashing overlap: a goroutine hashes each chunk, in order,
	// while the next is read (the chunks are disjoint parts of dst, never
	// written again once sent). The load then takes the longer of the two,
	// not their sum: a full-shape FP16 artifact is 13-25 GB.
	h := sha256.New()
	chunks := make(chan []byte, 4)
	hashed := make(chan struct{})
	go func() {
		defer close(hashed)
		for c := range chunks {
			h.Write(c)
		}
	}()
	for off := 0; off < len(dst); off += readChunk {
		chunk := dst[off:min(off+readChunk, len(dst))]
		if _, err := io.ReadFull(f, chunk); err != nil {
			close(chunks)
			<-hashed
			return "", fmt.Errorf("read %s at %d: %w", want.Path, off, err)
		}
		chunks <- chunk
	}
	close(chunks)
	<-hashed
	var one [1]byte
	if n, _ := f.Read(one[:]); n != 0 {
		return "", fmt.Errorf("%s is longer than %d bytes: %w", want.Path, len(dst), ErrCorrupt)
	}
	got := hex.EncodeToString(h.Sum(nil))
	if got != want.SHA256 {
		return got, fmt.Errorf("%s: sha256 %s, artifact.json lists %s: %w", want.Path, got, want.SHA256, ErrCorrupt)
	}
	return got, nil
}

// NonRoutedSet is nonrouted.safetensors mapped read-only.
type NonRoutedSet struct {
	mmap []byte
	st   safetensors.SafeTensors
}

// NonRouted maps nonrouted.safetensors read-only. Close it when done; the
// slices F16 returns alias the mapping.
func (a *Artifact) NonRouted() (*NonRoutedSet, error) {
	path := filepath.Join(a.Dir, NonRoutedFile)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open non-routed tensors: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat non-routed tensors: %w", err)
	}
	if fi.Size() < 8 {
		return nil, fmt.Errorf("%s: %d bytes, too short for safetensors: %w", path, fi.Size(), ErrCorrupt)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", path, err)
	}
	st, err := safetensors.Deserialize(m)
	if err != nil {
		unix.Munmap(m)
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &NonRoutedSet{mmap: m, st: st}, nil
}

// F16 returns the FP16 bits of a non-routed tensor and its shape. data
// aliases the read-only mapping: do not write to it and do not use it after
// Close.
func (s *NonRoutedSet) F16(name string) (data []uint16, shape []int, err error) {
	if s.mmap == nil {
		return nil, nil, fmt.Errorf("non-routed tensors: closed")
	}
	tv, ok := s.st.Tensor(name)
	if !ok {
		return nil, nil, fmt.Errorf("non-routed tensors: no tensor %q", name)
	}
	if tv.DType() != safetensors.F16 {
		return nil, nil, fmt.Errorf("non-routed tensor %q has dtype %s, want F16", name, tv.DType())
	}
	for _, d := range tv.Shape() {
		shape = append(shape, int(d))
	}
	b := tv.Data()
	if len(b) == 0 {
		return []uint16{}, shape, nil
	}
	if uintptr(unsafe.Pointer(&b[0]))%2 != 0 {
		return nil, nil, fmt.Errorf("non-routed tensor %q is not 2-byte aligned: %w", name, ErrCorrupt)
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2), shape, nil
}

// Names lists the non-routed tensors in file order.
func (s *NonRoutedSet) Names() []string { return s.st.Names() }

// Close unmaps the file.
func (s *NonRoutedSet) Close() error {
	if s.mmap == nil {
		return nil
	}
	err := unix.Munmap(s.mmap)
	s.mmap, s.st = nil, safetensors.SafeTensors{}
	return err
}

// Verify re-hashes every file and every tensor against artifact.json. The
// error (wrapping ErrCorrupt for a mismatch) names the first mismatch in
// file order, then tensor order.
func (a *Artifact) Verify() error {
	if err := a.check(); err != nil {
		return err
	}
	type mapped struct {
		data []byte
		err  error
	}
	maps := map[string]*mapped{}
	defer func() {
		for _, m := range maps {
			if len(m.data) > 0 {
				unix.Munmap(m.data)
			}
		}
	}()
	for _, f := range a.Meta.Files {
		m := &mapped{}
		maps[f.Path] = m
		m.data, m.err = mapFile(filepath.Join(a.Dir, f.Path))
		if m.err != nil {
			return fmt.Errorf("verify %s: %w", f.Path, m.err)
		}
		if int64(len(m.data)) != f.Bytes {
			return fmt.Errorf("verify %s: %d bytes, artifact.json lists %d: %w", f.Path, len(m.data), f.Bytes, ErrCorrupt)
		}
	}
	// Hash files and tensors on all cores; report in listing order.
	type job struct {
		what, want string
		data       []byte
	}
	var jobs []job
	for _, f := range a.Meta.Files {
		jobs = append(jobs, job{"file " + f.Path, f.SHA256, maps[f.Path].data})
	}
	for _, t := range a.Meta.Tensors {
		jobs = append(jobs, job{fmt.Sprintf("tensor %s (%s at %d)", t.Name, t.File, t.Offset), t.SHA256,
			maps[t.File].data[t.Offset : t.Offset+t.Bytes]})
	}
	bad := make([]string, len(jobs))
	parallelFor(len(jobs), func(i int) {
		sum := sha256.Sum256(jobs[i].data)
		if got := hex.EncodeToString(sum[:]); got != jobs[i].want {
			bad[i] = got
		}
	})
	for i, got := range bad {
		if got != "" {
			return fmt.Errorf("verify %s: sha256 %s, artifact.json lists %s: %w", jobs[i].what, got, jobs[i].want, ErrCorrupt)
		}
	}
	return nil
}

// mapFile maps a whole file read-only (nil for an empty file).
func mapFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() == 0 {
		return nil, nil
	}
	return unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
}

// filesSHA256 is the sha256sum-style digest of a file list: SHA-256 over
// "<sha256>  <path>\n" lines sorted by path.
func filesSHA256(files []FileEntry) string {
	sorted := append([]FileEntry(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	h := sha256.New()
	for _, f := range sorted {
		fmt.Fprintf(h, "%s  %s\n", f.SHA256, f.Path)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// parallelFor runs fn(0..n-1) on up to GOMAXPROCS goroutines.
func parallelFor(n int, fn func(i int)) {
	workers := min(n, maxWorkers())
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}
