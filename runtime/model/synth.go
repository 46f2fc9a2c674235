package model

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/horizon-runmap/horizon/runtime/outdir"
	"hash"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/horizon-runmap/horizon/runtime/half"
	"github.com/horizon-runmap/horizon/runtime/tokenizer"
)

// SynthFormat names the synthetic-checkpoint recipe: the seeding, the chunk
// size, the value distribution and the file layout. Any change to what
// Synthesize writes for a given arch and seed needs a new name.
const SynthFormat = "horizon-synth-v1"

// SynthInit describes the synthetic initialisation, as recorded in
// horizon-synth.json and the safetensors __metadata__.
const SynthInit = "normal(0, std) (math/rand/v2 NormFloat64) with std 1.0 for the embedding, " +
	"1/sqrt(in_features) for linear weights [out, in] and 0.02 for biases, from one PCG stream per tensor and " +
	"2^20-element chunk, seeded by SHA-256 of (format, seed, tensor name, chunk index), rounded to BF16 with " +
	"round-to-nearest-even, magnitudes below 2^-14 flushed to zero so every value is exact in FP16; " +
	"norm weights 1.0"

// SynthInfoName is the file that marks a directory as a synthetic checkpoint.
const SynthInfoName = "horizon-synth.json"

const (
	// synthChunkElems is the number of values drawn from one PCG stream.
	// Tensors are split into chunks of this many elements (row-major), each
	// with its own stream, so that generation parallelises independently of
	// the core count. Part of SynthFormat: never change it.
	synthChunkElems = 1 << 20
	// bf16FlushBelow is 2^-14 (the smallest normal FP16) as BF16 bits; a
	// BF16 value whose magnitude bits are below it is flushed to +0.
	bf16FlushBelow = 0x3880
	// bf16One is 1.0 as BF16 bits.
	bf16One = 0x3f80
	// DefaultShardBytes is the tensor-data limit of one shard when
	// SynthOptions.ShardBytes is 0.
	DefaultShardBytes int64 = 2 << 30
)

// SynthOptions configures Synthesize.
type SynthOptions struct {
	Arch       string // a preset name, see LookupPreset
	Seed       uint64
	OutDir     string // must not exist, or be an empty directory
	ShardBytes int64  // max bytes of tensor data per shard; 0 means DefaultShardBytes
	// Progress, when set, is called with the bytes of tensor data written
	// so far and the total; calls come from one goroutine at a time.
	Progress func(done, total int64)
	// Ctx, when set, cancels the synthesis; the temporary directory is
	// removed and Synthesize returns the context's error.
	Ctx context.Context
}

// FileDigest is the size and SHA-256 of one written file.
type FileDigest struct {
	Path   string `json:"path"` // relative to the checkpoint directory, slash-separated
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// SynthResult lists the files of a synthetic checkpoint.
type SynthResult struct {
	Files []FileDigest `json:"files"` // sorted by path
	// SHA256 is the checkpoint digest: SHA-256 over the lines
	// "<sha256>  <path>\n" of Files, in path order (sha256sum's format).
	SHA256 string `json:"sha256"`
}

// SynthInfo is the content of horizon-synth.json.
type SynthInfo struct {
	Schema        string `json:"schema"`  // "horizon.synth"
	Version       int    `json:"version"` // 1
	Format        string `json:"format"`  // SynthFormat
	Arch          string `json:"arch"`
	Seed          uint64 `json:"seed"`
	DType         string `json:"dtype"` // "BF16"
	Init          string `json:"init"`
	ChunkElements int    `json:"chunk_elements"`
	TensorCount   int    `json:"tensor_count"`
	TensorBytes   int64  `json:"tensor_bytes"`
}

// LoadSynthInfo reads dir/horizon-synth.json. The error wraps
// os.ErrNotExist when dir is not a synthetic checkpoint.
func LoadSynthInfo(dir string) (SynthInfo, error) {
	b, err := os.ReadFile(filepath.Join(dir, SynthInfoName))
	if err != nil {
		return SynthInfo{}, fmt.Errorf("read synthetic checkpoint info: %w", err)
	}
	var info SynthInfo
	if err := json.Unmarshal(b, &info); err != nil {
		return SynthInfo{}, fmt.Errorf("%s: %w", filepath.Join(dir, SynthInfoName), err)
	}
	return info, nil
}

// shardPlan is one safetensors file to write.
type shardPlan struct {
	file    string
	specs   []TensorSpec
	offsets [][2]int64 // data_offsets per spec
	bytes   int64      // tensor data bytes
}

func numElements(shape []int) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= int64(d)
	}
	return n
}

// planShards assigns tensors to shards in TensorSpecs order, starting a new
// shard when the next tensor would push the current one past limit (a tensor
// larger than limit gets a shard of its own).
func planShards(specs []TensorSpec, limit int64) []shardPlan {
	var plans []shardPlan
	cur := shardPlan{}
	for _, s := range specs {
		n := 2 * numElements(s.Shape) // BF16
		if len(cur.specs) > 0 && cur.bytes+n > limit {
			plans = append(plans, cur)
			cur = shardPlan{}
		}
		cur.specs = append(cur.specs, s)
		cur.offsets = append(cur.offsets, [2]int64{cur.bytes, cur.bytes + n})
		cur.bytes += n
	}
	plans = append(plans, cur)
	if len(plans) == 1 {
		plans[0].file = singleSafetensorsName
	} else {
		for i := range plans {
			plans[i].file = fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, len(plans))
		}
	}
	return plans
}

// safetensorsHeader renders the length prefix and JSON header of a shard.
// Keys are sorted (encoding/json sorts map keys) and the header is padded
// with spaces to a multiple of 8 bytes, as the reference writer does.
func safetensorsHeader(p shardPlan, meta map[string]string) ([]byte, error) {
	type tensorInfo struct {
		DType       string   `json:"dtype"`
		Shape       []int    `json:"shape"`
		DataOffsets [2]int64 `json:"data_offsets"`
	}
	h := make(map[string]any, len(p.specs)+1)
	h["__metadata__"] = meta
	for i, s := range p.specs {
		h[s.Name] = tensorInfo{DType: "BF16", Shape: s.Shape, DataOffsets: p.offsets[i]}
	}
	js, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("encode safetensors header: %w", err)
	}
	if pad := (8 - len(js)%8) % 8; pad > 0 {
		js = append(js, bytes.Repeat([]byte{' '}, pad)...)
	}
	out := binary.LittleEndian.AppendUint64(make([]byte, 0, 8+len(js)), uint64(len(js)))
	return append(out, js...), nil
}

// synthStream returns the PCG stream of one chunk of one tensor.
func synthStream(seed uint64, name string, chunk int64) *rand.Rand {
	h := sha256.New()
	var b [8]byte
	h.Write([]byte(SynthFormat + "\x00"))
	binary.LittleEndian.PutUint64(b[:], seed)
	h.Write(b[:])
	h.Write([]byte(name + "\x00"))
	binary.LittleEndian.PutUint64(b[:], uint64(chunk))
	h.Write(b[:])
	sum := h.Sum(nil)
	return rand.New(rand.NewPCG(binary.LittleEndian.Uint64(sum[0:8]), binary.LittleEndian.Uint64(sum[8:16])))
}

// synthChunk fills dst (little-endian BF16, len 2*elements) with chunk
// number chunk of the tensor.
func synthChunk(dst []byte, seed uint64, spec *TensorSpec, chunk int64) {
	if spec.Init == "ones" {
		for i := 0; i < len(dst); i += 2 {
			binary.LittleEndian.PutUint16(dst[i:], bf16One)
		}
		return
	}
	r := synthStream(seed, spec.Name, chunk)
	std := synthStd(spec)
	for i := 0; i < len(dst); i += 2 {
		v := half.F32ToBF16(float32(r.NormFloat64() * std))
		if v&0x7fff < bf16FlushBelow {
			v = 0
		}
		binary.LittleEndian.PutUint16(dst[i:], v)
	}
}

// synthStd is the standard deviation of a tensor's values: 1.0 for the
// embedding table, 1/sqrt(in_features) for a linear weight [out, in] (so each
// projection keeps unit variance: 0.0221 at hidden 2048, close to the 0.02 of
// the published initializer_range, and 0.0625 at the tiny models' 256), and
// 0.02 for biases. With a flat 0.02 the tiny models' layers barely move the
// residual stream, greedy streams collapse to one repeated token and the
// routed experts hardly influence the output, which would make token-equality
// tests insensitive.
func synthStd(spec *TensorSpec) float64 {
	switch {
	case spec.Init == "embed":
		return 1.0
	case len(spec.Shape) == 2:
		return 1 / math.Sqrt(float64(spec.Shape[1]))
	default:
		return 0.02
	}
}

// SynthTensor returns the values Synthesize writes for the named tensor of
// arch with seed (row-major, decoded from BF16). It is meant for tests and
// small tensors: it materialises the whole tensor.
func SynthTensor(arch string, seed uint64, name string) ([]float32, error) {
	p, err := LookupPreset(arch)
	if err != nil {
		return nil, err
	}
	for _, s := range p.Config.TensorSpecs() {
		if s.Name != name {
			continue
		}
		n := numElements(s.Shape)
		buf := make([]byte, 2*min(n, synthChunkElems))
		out := make([]float32, 0, n)
		for c := int64(0); c*synthChunkElems < n; c++ {
			m := min(n-c*synthChunkElems, synthChunkElems)
			b := buf[:2*m]
			synthChunk(b, seed, &s, c)
			for i := 0; i < len(b); i += 2 {
				out = append(out, half.BF16ToF32(binary.LittleEndian.Uint16(b[i:])))
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("architecture %s has no tensor %q", arch, name)
}

// Synthesize writes a deterministic synthetic checkpoint of a preset
// architecture in Hugging Face layout: config.json, generation_config.json,
// tokenizer.json (byte-level), BF16 safetensors (one file, or shards plus
// model.safetensors.index.json) and horizon-synth.json. The same arch and
// seed (and shard limit) always give byte-identical files.
//
// Tensor data is generated in parallel and streamed to disk with bounded
// memory (a few MiB per core). The checkpoint is written into a temporary
// sibling directory that is renamed to OutDir at the end; on error nothing
// is left behind.
func Synthesize(o SynthOptions) (res SynthResult, err error) {
	preset, err := LookupPreset(o.Arch)
	if err != nil {
		return SynthResult{}, fmt.Errorf("synthesize: %w", err)
	}
	cfg := preset.Config
	if o.OutDir == "" {
		return SynthResult{}, errors.New("synthesize: no output directory")
	}
	if o.ShardBytes < 0 {
		return SynthResult{}, fmt.Errorf("synthesize: negative shard size %d", o.ShardBytes)
	}
	limit := o.ShardBytes
	if limit == 0 {
		limit = DefaultShardBytes
	}
	if err := outdir.CheckEmptyOrAbsent(o.OutDir); err != nil {
		return SynthResult{}, fmt.Errorf("synthesize: %w", err)
	}
	out := filepath.Clean(o.OutDir)
	tmp, err := outdir.TempSibling(out, filepath.Base(out)+".tmp-")
	if err != nil {
		return SynthResult{}, fmt.Errorf("synthesize: %w", err)
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

	specs := cfg.TensorSpecs()
	plans := planShards(specs, limit)
	var total int64
	for _, p := range plans {
		total += p.bytes
	}
	var files []FileDigest
	addJSON := func(name string, v any) error {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return fmt.Errorf("encode %s: %w", name, err)
		}
		d, err := writeSmallFile(tmp, name, append(b, '\n'))
		files = append(files, d)
		return err
	}

	if err := addJSON("config.json", cfg.HFConfig()); err != nil {
		return SynthResult{}, fmt.Errorf("synthesize: %w", err)
	}
	gen := map[string]any{"eos_token_id": cfg.HFConfig()["eos_token_id"]}
	if err := addJSON("generation_config.json", gen); err != nil {
		return SynthResult{}, fmt.Errorf("synthesize: %w", err)
	}
	var tok bytes.Buffer
	if err := tokenizer.WriteByteLevelJSON(&tok, cfg.VocabSize, cfg.EOSTokenIDs); err != nil {
		return SynthResult{}, fmt.Errorf("synthesize: tokenizer.json: %w", err)
	}
	d, err := writeSmallFile(tmp, "tokenizer.json", tok.Bytes())
	files = append(files, d)
	if err != nil {
		return SynthResult{}, fmt.Errorf("synthesize: %w", err)
	}

	meta := map[string]string{
		"format":         "pt", // transformers refuses safetensors without it
		"horizon.format": SynthFormat,
		"arch":           o.Arch,
		"seed":           fmt.Sprint(o.Seed),
		"init":           SynthInit,
	}
	shardDigests, err := writeShards(ctx, tmp, plans, meta, o.Seed, total, o.Progress)
	files = append(files, shardDigests...)
	if err != nil {
		return SynthResult{}, fmt.Errorf("synthesize: %w", err)
	}
	if len(plans) > 1 {
		weights := make(map[string]string, len(specs))
		for _, p := range plans {
			for _, s := range p.specs {
				weights[s.Name] = p.file
			}
		}
		index := map[string]any{
			"metadata":   map[string]any{"total_size": total},
			"weight_map": weights,
		}
		if err := addJSON(safetensorsIndexName, index); err != nil {
			return SynthResult{}, fmt.Errorf("synthesize: %w", err)
		}
	}
	info := SynthInfo{
		Schema: "horizon.synth", Version: 1, Format: SynthFormat,
		Arch: o.Arch, Seed: o.Seed, DType: "BF16", Init: SynthInit,
		ChunkElements: synthChunkElems, TensorCount: len(specs), TensorBytes: total,
	}
	if err := addJSON(SynthInfoName, info); err != nil {
		return SynthResult{}, fmt.Errorf("synthesize: %w", err)
	}

	if err := syncDir(tmp); err != nil {
		return SynthResult{}, fmt.Errorf("synthesize: %w", err)
	}
	// rename(2) atomically replaces an empty directory (os.Rename refuses).
	if err := unix.Rename(tmp, out); err != nil {
		return SynthResult{}, fmt.Errorf("synthesize: publish: %w", &os.LinkError{Op: "rename", Old: tmp, New: out, Err: err})
	}
	_ = syncDir(filepath.Dir(out))
	return newSynthResult(files), nil
}

// newSynthResult sorts the digests and computes the checkpoint digest.
func newSynthResult(files []FileDigest) SynthResult {
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%s  %s\n", f.SHA256, f.Path)
	}
	return SynthResult{Files: files, SHA256: hex.EncodeToString(h.Sum(nil))}
}

// writeSmallFile writes data to dir/name and returns its digest.
func writeSmallFile(dir, name string, data []byte) (FileDigest, error) {
	sum := sha256.Sum256(data)
	d := FileDigest{Path: name, Bytes: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return d, err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return d, fmt.Errorf("write %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return d, fmt.Errorf("sync %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return d, fmt.Errorf("close %s: %w", name, err)
	}
	return d, nil
}

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

// synthJob is one chunk of one tensor on its way to disk.
type synthJob struct {
	spec  *TensorSpec
	chunk int64
	buf   []byte        // 2 * chunk elements
	done  chan struct{} // closed once buf is filled
}

// writeOp is one step for the writer goroutine.
type writeOp struct {
	f       *os.File
	buf     []byte
	data    bool                   // tensor data (counts for progress, buf goes back to the pool)
	closeFn func() (string, error) // when set: sync and close f; the string names it
}

// writeShards generates and writes every shard. Stages, all bounded:
// a producer hands chunks (each with a pool buffer) to workers and, in the
// same order, to this goroutine, which hashes them in order and passes them
// to a writer goroutine; the writer returns buffers to the pool. The pool
// holds the only tensor buffers, so memory is bounded by its size.
func writeShards(ctx context.Context, dir string, plans []shardPlan, meta map[string]string,
	seed uint64, total int64, progress func(done, total int64)) ([]FileDigest, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	workers := runtime.GOMAXPROCS(0)
	window := max(4*workers, 8)
	var maxChunk int64
	for _, p := range plans {
		for _, s := range p.specs {
			maxChunk = max(maxChunk, min(numElements(s.Shape), synthChunkElems))
		}
	}
	pool := make(chan []byte, window)
	for range window {
		pool <- nil // allocated on first use
	}
	jobs := make(chan *synthJob, window)
	order := make(chan *synthJob, window)

	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // producer
		defer wg.Done()
		defer close(jobs)
		defer close(order)
		for pi := range plans {
			for si := range plans[pi].specs {
				s := &plans[pi].specs[si]
				n := numElements(s.Shape)
				for c := int64(0); c*synthChunkElems < n; c++ {
					var buf []byte
					select {
					case buf = <-pool:
					case <-ctx.Done():
						return
					}
					if buf == nil {
						buf = make([]byte, 2*maxChunk)
					}
					j := &synthJob{spec: s, chunk: c, buf: buf[:2*min(n-c*synthChunkElems, synthChunkElems)], done: make(chan struct{})}
					jobs <- j // never blocks: at most window jobs hold buffers
					select {
					case order <- j:
					case <-ctx.Done():
						return
					}
				}
			}
		}
	}()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if ctx.Err() == nil {
					synthChunk(j.buf, seed, j.spec, j.chunk)
				}
				close(j.done)
			}
		}()
	}

	writes := make(chan writeOp, window)
	writerDone := make(chan error, 1)
	go func() { // writer
		var werr error
		var written int64
		// A finished shard is synced and closed in the background while
		// the next one is written; closeErrs collects the outcome.
		var closers sync.WaitGroup
		closeErrs := make(chan error, len(plans))
		for op := range writes {
			switch {
			case op.closeFn != nil:
				closers.Add(1)
				go func() {
					defer closers.Done()
					if name, err := op.closeFn(); err != nil {
						closeErrs <- fmt.Errorf("%s: %w", name, err)
						cancel()
					}
				}()
			case werr != nil:
				// Failed: drain the queue without writing.
			default:
				if _, err := op.f.Write(op.buf); err != nil {
					werr = fmt.Errorf("write: %w", err)
					cancel()
				} else if op.data {
					written += int64(len(op.buf))
					if progress != nil {
						progress(written, total)
					}
				}
			}
			if op.data {
				pool <- op.buf[:cap(op.buf)]
			}
		}
		closers.Wait()
		close(closeErrs)
		for err := range closeErrs {
			werr = cmp.Or(werr, err)
		}
		writerDone <- werr
	}()

	digests, err := hashShards(ctx, dir, plans, meta, order, writes)
	if err != nil {
		cancel()
	}
	close(writes)
	werr := <-writerDone
	// Drain so the producer can exit, then wait for every goroutine.
	go func() {
		for range order {
		}
	}()
	wg.Wait()
	switch {
	case werr != nil:
		return digests, werr
	case err != nil:
		return digests, err
	}
	return digests, ctx.Err()
}

// hashShards creates the shard files, hashes the header and every chunk in
// order, and queues them for the writer.
func hashShards(ctx context.Context, dir string, plans []shardPlan, meta map[string]string,
	order <-chan *synthJob, writes chan<- writeOp) ([]FileDigest, error) {
	var digests []FileDigest
	for _, p := range plans {
		hdr, err := safetensorsHeader(p, meta)
		if err != nil {
			return digests, err
		}
		f, err := os.Create(filepath.Join(dir, p.file))
		if err != nil {
			return digests, err
		}
		name := p.file
		closeFn := func() (string, error) {
			if err := f.Sync(); err != nil {
				f.Close()
				return name, err
			}
			return name, f.Close()
		}
		h := sha256.New()
		h.Write(hdr)
		writes <- writeOp{f: f, buf: hdr}
		if err := hashChunks(ctx, p, h, order, f, writes); err != nil {
			writes <- writeOp{closeFn: closeFn}
			return digests, err
		}
		writes <- writeOp{closeFn: closeFn}
		digests = append(digests, FileDigest{Path: p.file, Bytes: int64(len(hdr)) + p.bytes, SHA256: hex.EncodeToString(h.Sum(nil))})
	}
	return digests, nil
}

// hashChunks consumes the chunks of one shard.
func hashChunks(ctx context.Context, p shardPlan, h hash.Hash, order <-chan *synthJob, f *os.File, writes chan<- writeOp) error {
	var got int64
	for got < p.bytes {
		j, ok := <-order
		if !ok {
			if err := ctx.Err(); err != nil {
				return err
			}
			return fmt.Errorf("%s: internal error: chunk stream ended early", p.file)
		}
		<-j.done
		if err := ctx.Err(); err != nil {
			return err // j.buf may be unfilled; the pool is discarded anyway
		}
		h.Write(j.buf)
		got += int64(len(j.buf))
		writes <- writeOp{f: f, buf: j.buf, data: true}
	}
	return nil
}
