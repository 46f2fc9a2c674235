package qpack

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/horizon-runmap/horizon/runtime/outdir"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nlpodyssey/safetensors"

	"github.com/horizon-runmap/horizon/runtime/model"
)

// PrepareOptions configures Prepare.
type PrepareOptions struct {
	Checkpoint string // Hugging Face checkpoint directory (real or synthetic)
	Out        string // artifact directory: must not exist, or be empty
	Scheme     Scheme // routed-expert scheme; "" means SchemeInt4
	// Progress, when set, is called with the checkpoint tensor bytes
	// processed so far and the total. Calls never overlap and done only
	// grows.
	Progress func(done, total int64)
	// Ctx, when set, cancels the preparation: the temporary directory is
	// removed and Prepare returns the context's error.
	Ctx context.Context
}

// copiedFiles are checkpoint files copied verbatim into the artifact when
// present, so that it is self-contained. config.json is required.
var copiedFiles = []string{
	"config.json",
	"generation_config.json",
	"special_tokens_map.json",
	"tokenizer.json",
	"tokenizer_config.json",
}

// windowBytes bounds the expert records held in memory at once.
const windowBytes = 256 << 20

func maxWorkers() int { return max(1, runtime.GOMAXPROCS(0)) }

// Prepare converts a checkpoint into an artifact (see Artifact):
// routed-expert matrices in o.Scheme into experts.bin, every other tensor as
// FP16 into nonrouted.safetensors, plus artifact.json and copies of the
// config and tokenizer files.
//
// It streams: expert records are encoded a bounded window at a time (about
// 256 MiB, at least one record per core) on GOMAXPROCS goroutines and
// written in [layer][expert] order, so the output is byte-identical for the
// same checkpoint whatever the core count. A non-routed tensor is converted
// whole (one float32 copy of the largest tensor, e.g. Qwen's 151936 x 2048
// embedding, is held at a time).
//
// Everything is written into a temporary sibling directory that is renamed
// to o.Out at the end; on error it is removed. A NaN or infinite weight is
// an error naming the tensor and position.
func Prepare(o PrepareOptions) (rep Report, err error) {
	scheme := o.Scheme
	if scheme == "" {
		scheme = SchemeInt4
	}
	if !scheme.Valid() {
		return Report{}, fmt.Errorf("prepare: unknown expert scheme %q (want %s or %s)", o.Scheme, SchemeInt4, SchemeFP16)
	}
	if o.Checkpoint == "" || o.Out == "" {
		return Report{}, errors.New("prepare: checkpoint and output directories are required")
	}
	out := filepath.Clean(o.Out)
	if err := outdir.CheckEmptyOrAbsent(out); err != nil {
		return Report{}, fmt.Errorf("prepare: %w", err)
	}
	ckpt, err := model.OpenCheckpoint(o.Checkpoint)
	if err != nil {
		return Report{}, fmt.Errorf("prepare: %w", err)
	}
	defer ckpt.Close()

	tmp, err := outdir.TempSibling(out, "."+filepath.Base(out)+".partial-")
	if err != nil {
		return Report{}, fmt.Errorf("prepare: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()

	ctx := o.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	p, err := newPreparer(ctx, ckpt, scheme, tmp, o.Progress)
	if err != nil {
		return Report{}, fmt.Errorf("prepare: %w", err)
	}
	// Hash the checkpoint while converting it.
	type ckptHash struct {
		sum string
		err error
	}
	hashDone := make(chan ckptHash, 1)
	var stopHash atomic.Bool
	go func() {
		sum, _, err := checkpointSHA256(ckpt.Dir, &stopHash)
		hashDone <- ckptHash{sum, err}
	}()
	stopWatch := context.AfterFunc(ctx, func() { stopHash.Store(true) })
	err = p.run()
	if err != nil {
		stopHash.Store(true)
	}
	h := <-hashDone
	stopWatch()
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		return Report{}, fmt.Errorf("prepare: %w", err)
	}
	if h.err != nil {
		return Report{}, fmt.Errorf("prepare: hash checkpoint: %w", h.err)
	}
	meta, err := p.finish(h.sum)
	if err != nil {
		return Report{}, fmt.Errorf("prepare: %w", err)
	}
	if err := syncDir(tmp); err != nil {
		return Report{}, fmt.Errorf("prepare: %w", err)
	}
	// os.Rename refuses to replace a directory, even an empty one: remove
	// the empty output first (Remove fails if something appeared in it).
	if err := os.Remove(out); err != nil && !errors.Is(err, os.ErrNotExist) {
		return Report{}, fmt.Errorf("prepare: output %s: %w", out, err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return Report{}, fmt.Errorf("prepare: publish %s: %w", out, err)
	}
	_ = syncDir(filepath.Dir(out))
	return meta.Report, nil
}

// preparer holds the state of one Prepare run.
type preparer struct {
	ctx      context.Context
	ckpt     *model.Checkpoint
	cfg      model.Config
	scheme   Scheme
	layout   RecordLayout
	dir      string
	progress func(done, total int64)

	specs   []model.TensorSpec
	dtypes  map[string]string // checkpoint dtype per tensor
	entries map[string]*TensorEntry
	files   []FileEntry

	report Report

	progMu   sync.Mutex
	done     int64
	total    int64
	srcBytes map[string]int64
}

func newPreparer(ctx context.Context, ckpt *model.Checkpoint, scheme Scheme, dir string, progress func(done, total int64)) (*preparer, error) {
	cfg := ckpt.Config
	layout, err := NewRecordLayout(scheme, cfg.HiddenSize, cfg.ExpertFFN)
	if err != nil {
		return nil, err
	}
	p := &preparer{
		ctx: ctx, ckpt: ckpt, cfg: cfg, scheme: scheme, layout: layout, dir: dir, progress: progress,
		specs: cfg.TensorSpecs(), dtypes: map[string]string{}, entries: map[string]*TensorEntry{},
		srcBytes: map[string]int64{},
	}
	for _, s := range p.specs {
		dt, err := ckpt.DType(s.Name)
		if err != nil {
			return nil, err
		}
		p.dtypes[s.Name] = dt
		size := int64(2)
		if dt == "F32" {
			size = 4
		}
		n := size * elements(s.Shape)
		p.srcBytes[s.Name] = n
		p.total += n
	}
	p.report = Report{
		Scheme: scheme, RecordBytes: layout.Size, Records: cfg.NumLayers * cfg.NumExperts,
		ExpertBytes:         int64(cfg.NumLayers) * int64(cfg.NumExperts) * int64(layout.Size),
		PaddedColsPerMatrix: map[string]int{},
	}
	for i, m := range layout.Matrices() {
		if m.ColsPadded != m.Cols {
			p.report.PaddedColsPerMatrix[model.ExpertProjs[i]] = m.ColsPadded
		}
	}
	return p, nil
}

func elements(shape []int) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= int64(d)
	}
	return n
}

// advance reports that the named tensor has been processed.
func (p *preparer) advance(name string) {
	p.progMu.Lock()
	defer p.progMu.Unlock()
	p.done += p.srcBytes[name]
	if p.progress != nil {
		p.progress(p.done, p.total)
	}
}

func (p *preparer) run() error {
	if err := p.writeExperts(); err != nil {
		return err
	}
	if err := p.writeNonRouted(); err != nil {
		return err
	}
	return p.copyFiles()
}

// scaleDType is the per-tensor scale_dtype of a routed tensor.
func (p *preparer) scaleDType() *string {
	if p.scheme == SchemeInt4 {
		s := DTypeFP16
		return &s
	}
	return nil
}

// writeExperts encodes every expert record into experts.bin.
func (p *preparer) writeExperts() error {
	L, E, size := p.cfg.NumLayers, p.cfg.NumExperts, p.layout.Size
	nrec := L * E
	workers := maxWorkers()
	window := min(nrec, max(workers, windowBytes/size))
	buf := make([]byte, window*size)

	f, err := os.Create(filepath.Join(p.dir, ExpertsFile))
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(f, h), 4<<20)

	mats := p.layout.Matrices()
	maxVals := 0
	for _, m := range mats {
		maxVals = max(maxVals, m.Rows*m.Cols)
	}
	scratch := make([][]float32, workers)
	stats := make([]QuantStats, workers)
	saturated := make([]int64, workers)
	entries := make([]TensorEntry, nrec*3)
	errs := make([]error, window)

	for start := 0; start < nrec; start += window {
		if err := p.ctx.Err(); err != nil {
			return err
		}
		n := min(window, nrec-start)
		win := buf[:n*size]
		clear(win) // alignment padding is zero
		clear(errs)
		var next atomic.Int64
		var failed atomic.Bool
		var wg sync.WaitGroup
		for w := 0; w < min(workers, n); w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				if scratch[w] == nil {
					scratch[w] = make([]float32, maxVals)
				}
				for {
					i := int(next.Add(1) - 1)
					if i >= n || failed.Load() {
						return
					}
					r := start + i
					l, e := r/E, r%E
					rec := win[i*size : (i+1)*size]
					for j, m := range mats {
						name := model.ExpertTensorName(l, e, model.ExpertProjs[j])
						vals := scratch[w][:m.Rows*m.Cols]
						if err := p.ckpt.ReadF32(name, vals); err != nil {
							errs[i] = err
							failed.Store(true)
							return
						}
						ms, err := p.layout.EncodeMatrix(rec, m, vals)
						if err != nil {
							errs[i] = fmt.Errorf("tensor %s: %w", name, err)
							failed.Store(true)
							return
						}
						stats[w].Add(ms.Quant)
						saturated[w] += ms.Saturated
						te := TensorEntry{
							Name: name, Kind: KindRouted, Shape: []int{m.Rows, m.Cols},
							OriginalDType: p.dtypes[name], Stored: p.scheme.StoredDType(),
							ScaleDType: p.scaleDType(), ActivationDType: DTypeFP16, AccumulationDType: DTypeFP32,
							File: ExpertsFile, Offset: int64(r)*int64(size) + int64(m.Offset), Bytes: int64(m.Bytes),
							SHA256: hex.EncodeToString(ms.SHA256[:]),
						}
						if p.scheme == SchemeInt4 {
							te.ColsPadded = m.ColsPadded
						}
						entries[r*3+j] = te
						p.advance(name)
					}
				}
			}(w)
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		if _, err := bw.Write(win); err != nil {
			return fmt.Errorf("write %s: %w", ExpertsFile, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", ExpertsFile, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", ExpertsFile, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", ExpertsFile, err)
	}
	for w := range stats {
		p.report.Quant.Add(stats[w])
		p.report.SaturatedRouted += saturated[w]
	}
	p.report.SaturatedScales = p.report.Quant.SaturatedScales
	for i := range entries {
		p.entries[entries[i].Name] = &entries[i]
	}
	p.files = append(p.files, FileEntry{Path: ExpertsFile, Bytes: p.report.ExpertBytes, SHA256: hex.EncodeToString(h.Sum(nil))})
	return nil
}

// lazyF16 is a safetensors.View that converts its tensor to FP16 only when
// the writer asks for its data, so one tensor is in memory at a time.
type lazyF16 struct {
	p    *nonroutedWriter
	spec *model.TensorSpec
}

func (v lazyF16) DType() safetensors.DType { return safetensors.F16 }
func (v lazyF16) DataLen() uint64          { return uint64(2 * elements(v.spec.Shape)) }
func (v lazyF16) Shape() []uint64 {
	s := make([]uint64, len(v.spec.Shape))
	for i, d := range v.spec.Shape {
		s[i] = uint64(d)
	}
	return s
}

// Data converts the tensor. The library cannot take an error here: on
// failure it records the error and returns nil, and the guarded writer
// fails the next write.
func (v lazyF16) Data() []byte { return v.p.convert(v.spec) }

// nonroutedWriter converts non-routed tensors for SerializeToWriter.
type nonroutedWriter struct {
	p         *preparer
	err       error
	f32       []float32
	f16       []byte
	sums      map[string]string
	saturated int64
}

func (w *nonroutedWriter) convert(spec *model.TensorSpec) []byte {
	if w.err == nil {
		w.err = w.p.ctx.Err()
	}
	if w.err != nil {
		return nil
	}
	n := int(elements(spec.Shape))
	if cap(w.f32) < n {
		w.f32 = make([]float32, n)
		w.f16 = make([]byte, 2*n)
	}
	vals, out := w.f32[:n], w.f16[:2*n]
	if err := w.p.ckpt.ReadF32(spec.Name, vals); err != nil {
		w.err = err
		return nil
	}
	sat, err := EncodeFP16Matrix(out, vals)
	if err != nil {
		i := firstNonFinite(vals)
		w.err = fmt.Errorf("tensor %s: element %d (index %v): %w", spec.Name, i, unflatten(i, spec.Shape), ErrNonFinite)
		return nil
	}
	w.saturated += sat
	sum := sha256.Sum256(out)
	w.sums[spec.Name] = hex.EncodeToString(sum[:])
	w.p.advance(spec.Name)
	return out
}

// unflatten turns a row-major flat index into per-dimension indices.
func unflatten(i int, shape []int) []int {
	idx := make([]int, len(shape))
	for d := len(shape) - 1; d >= 0; d-- {
		idx[d] = i % shape[d]
		i /= shape[d]
	}
	return idx
}

// guardWriter fails every write once the converter has failed.
type guardWriter struct {
	w   io.Writer
	err *error
}

func (g guardWriter) Write(b []byte) (int, error) {
	if *g.err != nil {
		return 0, *g.err
	}
	return g.w.Write(b)
}

// writeNonRouted writes every non-routed tensor as FP16 into
// nonrouted.safetensors (tensors sorted by name, as the library lays them
// out, with __metadata__ {"format": "pt"} so transformers can load it).
func (p *preparer) writeNonRouted() error {
	views := map[string]lazyF16{}
	w := &nonroutedWriter{p: p, sums: map[string]string{}}
	for i := range p.specs {
		s := &p.specs[i]
		if s.Kind == model.NonRouted {
			views[s.Name] = lazyF16{p: w, spec: s}
		}
	}
	path := filepath.Join(p.dir, NonRoutedFile)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(f, h)}
	bw := bufio.NewWriterSize(cw, 4<<20)
	meta := map[string]string{"format": "pt", "horizon.stored": DTypeFP16}
	if err := safetensors.SerializeToWriter(views, meta, guardWriter{w: bw, err: &w.err}); err != nil {
		if w.err != nil {
			return w.err
		}
		return fmt.Errorf("write %s: %w", NonRoutedFile, err)
	}
	if w.err != nil {
		return w.err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", NonRoutedFile, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", NonRoutedFile, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", NonRoutedFile, err)
	}
	w.f32, w.f16 = nil, nil

	// Read the header back for the offsets the library chose.
	dataStart, offsets, err := readSafetensorsOffsets(path)
	if err != nil {
		return err
	}
	for i := range p.specs {
		s := &p.specs[i]
		if s.Kind != model.NonRouted {
			continue
		}
		off, ok := offsets[s.Name]
		if !ok {
			return fmt.Errorf("%s: internal error: tensor %s missing from the written header", NonRoutedFile, s.Name)
		}
		p.entries[s.Name] = &TensorEntry{
			Name: s.Name, Kind: KindNonRouted, Shape: append([]int(nil), s.Shape...),
			OriginalDType: p.dtypes[s.Name], Stored: DTypeFP16, ScaleDType: nil,
			ActivationDType: DTypeFP16, AccumulationDType: DTypeFP32,
			File: NonRoutedFile, Offset: dataStart + off[0], Bytes: off[1] - off[0],
			SHA256: w.sums[s.Name],
		}
		p.report.NonRoutedBytes += off[1] - off[0]
	}
	p.report.SaturatedNonRouted = w.saturated
	p.files = append(p.files, FileEntry{Path: NonRoutedFile, Bytes: cw.n, SHA256: hex.EncodeToString(h.Sum(nil))})
	return nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// readSafetensorsOffsets returns where tensor data starts in a safetensors
// file (8 + header length) and each tensor's data_offsets.
func readSafetensorsOffsets(path string) (int64, map[string][2]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	var lenBuf [8]byte
	if _, err := io.ReadFull(f, lenBuf[:]); err != nil {
		return 0, nil, fmt.Errorf("%s: read header length: %w", path, err)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > 100<<20 {
		return 0, nil, fmt.Errorf("%s: header of %d bytes is too large", path, n)
	}
	hdr := make([]byte, n)
	if _, err := io.ReadFull(f, hdr); err != nil {
		return 0, nil, fmt.Errorf("%s: read header: %w", path, err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &raw); err != nil {
		return 0, nil, fmt.Errorf("%s: parse header: %w", path, err)
	}
	offsets := make(map[string][2]int64, len(raw))
	for name, v := range raw {
		if name == "__metadata__" {
			continue
		}
		var t struct {
			DataOffsets [2]int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(v, &t); err != nil {
			return 0, nil, fmt.Errorf("%s: tensor %q: %w", path, name, err)
		}
		offsets[name] = t.DataOffsets
	}
	return 8 + int64(n), offsets, nil
}

// copyFiles copies the config and tokenizer files.
func (p *preparer) copyFiles() error {
	for _, name := range copiedFiles {
		src, err := os.Open(filepath.Join(p.ckpt.Dir, name))
		if errors.Is(err, os.ErrNotExist) && name != "config.json" {
			continue
		} else if err != nil {
			return fmt.Errorf("copy %s: %w", name, err)
		}
		fe, err := copyHashed(src, filepath.Join(p.dir, name))
		src.Close()
		if err != nil {
			return fmt.Errorf("copy %s: %w", name, err)
		}
		fe.Path = name
		p.files = append(p.files, fe)
	}
	return nil
}

func copyHashed(src io.Reader, dst string) (FileEntry, error) {
	f, err := os.Create(dst)
	if err != nil {
		return FileEntry{}, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), src)
	if err != nil {
		return FileEntry{}, err
	}
	if err := f.Sync(); err != nil {
		return FileEntry{}, err
	}
	if err := f.Close(); err != nil {
		return FileEntry{}, err
	}
	return FileEntry{Bytes: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// finish assembles and writes artifact.json.
func (p *preparer) finish(checkpointSHA string) (ArtifactMeta, error) {
	sort.Slice(p.files, func(i, j int) bool { return p.files[i].Path < p.files[j].Path })
	artifactSHA := filesSHA256(p.files)
	p.report.ArtifactSHA256 = artifactSHA

	cfgJSON, err := os.ReadFile(filepath.Join(p.dir, "config.json"))
	if err != nil {
		return ArtifactMeta{}, err
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(cfgJSON, &obj); err != nil {
		return ArtifactMeta{}, fmt.Errorf("config.json is not a JSON object: %w", err)
	}
	var synth json.RawMessage
	if b, err := os.ReadFile(filepath.Join(p.ckpt.Dir, model.SynthInfoName)); err == nil {
		if !json.Valid(b) {
			return ArtifactMeta{}, fmt.Errorf("%s is not valid JSON", model.SynthInfoName)
		}
		synth = compactJSON(b)
	} else if !errors.Is(err, os.ErrNotExist) {
		return ArtifactMeta{}, err
	}
	srcDir, err := filepath.Abs(p.ckpt.Dir)
	if err != nil {
		srcDir = p.ckpt.Dir
	}

	orig := ""
	for _, s := range p.specs {
		switch dt := p.dtypes[s.Name]; {
		case orig == "":
			orig = dt
		case orig != dt:
			orig = "MIXED"
		}
	}
	meta := ArtifactMeta{
		Schema:  ArtifactSchema,
		Version: ArtifactVersion,
		Identity: Identity{
			Arch:   p.cfg.ModelType,
			Source: SourceIdentity{Dir: srcDir, CheckpointSHA256: checkpointSHA, Synthetic: synth},
			Config: compactJSON(cfgJSON),
		},
		DTypes: DTypes{
			OriginalDType: orig, RoutedScheme: p.scheme, ScaleDType: p.scaleDType(),
			NonRoutedDType: DTypeFP16, ActivationDType: DTypeFP16, AccumulationDType: DTypeFP32,
		},
		Experts: ExpertsMeta{
			File: ExpertsFile, Layers: p.cfg.NumLayers, ExpertsPerLayer: p.cfg.NumExperts,
			RecordBytes: p.layout.Size, Bytes: p.report.ExpertBytes, Layout: p.layout, Order: ExpertOrder,
		},
		Files:          p.files,
		Report:         p.report,
		ArtifactSHA256: artifactSHA,
	}
	for _, s := range p.specs {
		meta.Tensors = append(meta.Tensors, *p.entries[s.Name])
	}
	b, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return ArtifactMeta{}, fmt.Errorf("encode %s: %w", MetaFile, err)
	}
	if _, err := copyHashed(bytes.NewReader(append(b, '\n')), filepath.Join(p.dir, MetaFile)); err != nil {
		return ArtifactMeta{}, fmt.Errorf("write %s: %w", MetaFile, err)
	}
	return meta, nil
}

func compactJSON(b []byte) json.RawMessage {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return json.RawMessage(b)
	}
	return buf.Bytes()
}

// CheckpointSHA256 hashes a checkpoint directory the way SynthResult.SHA256
// does: SHA-256 over the lines "<sha256>  <name>\n", sorted by name, of
// every regular file directly in dir (symlinks followed, as in a Hugging
// Face cache snapshot; names starting with "." and subdirectories skipped).
// Files are hashed in parallel.
func CheckpointSHA256(dir string) (string, []FileEntry, error) {
	return checkpointSHA256(dir, new(atomic.Bool))
}

// errStopped ends a checkpoint hash that is no longer wanted.
var errStopped = errors.New("stopped")

func checkpointSHA256(dir string, stop *atomic.Bool) (string, []FileEntry, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", nil, err
	}
	var files []FileEntry
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		st, err := os.Stat(filepath.Join(dir, e.Name()))
		if err != nil {
			return "", nil, err
		}
		if st.Mode().IsRegular() {
			files = append(files, FileEntry{Path: e.Name(), Bytes: st.Size()})
		}
	}
	errs := make([]error, len(files))
	parallelFor(len(files), func(i int) {
		f, err := os.Open(filepath.Join(dir, files[i].Path))
		if err != nil {
			errs[i] = err
			return
		}
		defer f.Close()
		h := sha256.New()
		buf := make([]byte, 1<<20)
		var n int64
		for {
			if stop.Load() {
				errs[i] = errStopped
				return
			}
			k, err := f.Read(buf)
			h.Write(buf[:k])
			n += int64(k)
			if err == io.EOF {
				break
			} else if err != nil {
				errs[i] = fmt.Errorf("hash %s: %w", files[i].Path, err)
				return
			}
		}
		files[i].Bytes = n
		files[i].SHA256 = hex.EncodeToString(h.Sum(nil))
	})
	if err := errors.Join(errs...); err != nil {
		return "", nil, err
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return filesSHA256(files), files, nil
}

// ErrOutputExists marks an output directory that already has content.
var ErrOutputExists = outdir.ErrNotEmpty

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
