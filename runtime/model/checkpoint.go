package model

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/nlpodyssey/safetensors"
	"golang.org/x/sys/unix"

	"github.com/horizon-runmap/horizon/runtime/half"
)

// Names of the files of a Hugging Face checkpoint directory.
const (
	singleSafetensorsName = "model.safetensors"
	safetensorsIndexName  = "model.safetensors.index.json"
)

// Checkpoint is an opened Hugging Face checkpoint directory: config.json plus
// one model.safetensors or a set of shards listed by
// model.safetensors.index.json. Every shard is mapped read-only; tensors are
// decoded on demand. A Checkpoint is safe for concurrent reads; Close must
// not race with them.
type Checkpoint struct {
	Dir    string
	Config Config

	shards  []*shard             // sorted by file name
	tensors map[string]tensorRef // every tensor the checkpoint lists
	meta    map[string]string    // __metadata__ of the first shard
}

// shard is one mapped safetensors file.
type shard struct {
	name string // relative to Checkpoint.Dir
	mmap []byte // the whole file (nil for an empty mapping)
	data []byte // the data region: mmap[8+headerLen:]
}

// tensorRef locates one tensor's bytes.
type tensorRef struct {
	shard *shard
	info  *safetensors.TensorInfo
}

// OpenCheckpoint reads dir/config.json, maps dir/model.safetensors (or every
// shard named by dir/model.safetensors.index.json) and checks that each tensor
// of Config.TensorSpecs() is present with exactly its HF shape and a dtype of
// BF16, F16 or F32. Errors name the offending file or tensor.
func OpenCheckpoint(dir string) (*Checkpoint, error) {
	cfg, err := LoadConfig(dir)
	if err != nil {
		return nil, fmt.Errorf("open checkpoint %s: %w", dir, err)
	}
	c := &Checkpoint{Dir: dir, Config: cfg, tensors: map[string]tensorRef{}}
	if err := c.open(); err != nil {
		c.Close()
		return nil, fmt.Errorf("open checkpoint %s: %w", dir, err)
	}
	return c, nil
}

func (c *Checkpoint) open() error {
	// Like transformers, prefer the single file when both layouts exist.
	single := filepath.Join(c.Dir, singleSafetensorsName)
	if _, err := os.Stat(single); err == nil {
		s, err := mapShard(c.Dir, singleSafetensorsName)
		if err != nil {
			return err
		}
		c.shards = []*shard{s}
		md, err := s.header()
		if err != nil {
			return err
		}
		c.meta = md.Metadata()
		for name, info := range md.Tensors() {
			c.tensors[name] = tensorRef{shard: s, info: info}
		}
		return c.validate()
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("stat %s: %w", single, err)
	}

	indexPath := filepath.Join(c.Dir, safetensorsIndexName)
	b, err := os.ReadFile(indexPath)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("no %s and no %s in the directory", singleSafetensorsName, safetensorsIndexName)
	} else if err != nil {
		return fmt.Errorf("read safetensors index: %w", err)
	}
	var index struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(b, &index); err != nil {
		return fmt.Errorf("%s: %w", safetensorsIndexName, err)
	}
	if len(index.WeightMap) == 0 {
		return fmt.Errorf("%s: empty or missing weight_map", safetensorsIndexName)
	}
	var files []string
	byFile := map[string][]string{} // shard file -> tensor names the index puts there
	for name, file := range index.WeightMap {
		if file == "" || filepath.IsAbs(file) || strings.Contains(filepath.ToSlash(file), "/") {
			return fmt.Errorf("%s: tensor %q maps to invalid shard file name %q", safetensorsIndexName, name, file)
		}
		if _, ok := byFile[file]; !ok {
			files = append(files, file)
		}
		byFile[file] = append(byFile[file], name)
	}
	sort.Strings(files)
	for i, file := range files {
		s, err := mapShard(c.Dir, file)
		if err != nil {
			return err
		}
		c.shards = append(c.shards, s)
		md, err := s.header()
		if err != nil {
			return err
		}
		if i == 0 {
			c.meta = md.Metadata()
		}
		infos := md.Tensors()
		names := byFile[file]
		sort.Strings(names)
		for _, name := range names {
			info, ok := infos[name]
			if !ok {
				return fmt.Errorf("%s maps tensor %q to %s, which does not contain it", safetensorsIndexName, name, file)
			}
			c.tensors[name] = tensorRef{shard: s, info: info}
		}
	}
	return c.validate()
}

// validate checks every tensor the configuration requires.
func (c *Checkpoint) validate() error {
	for _, spec := range c.Config.TensorSpecs() {
		ref, ok := c.tensors[spec.Name]
		if !ok {
			return fmt.Errorf("missing tensor %q (shape %v)", spec.Name, spec.Shape)
		}
		if !sameShape(ref.info.Shape, spec.Shape) {
			return fmt.Errorf("%s: tensor %q has shape %v, want %v", ref.shard.name, spec.Name, ref.info.Shape, spec.Shape)
		}
		switch ref.info.DType {
		case safetensors.BF16, safetensors.F16, safetensors.F32:
		default:
			return fmt.Errorf("%s: tensor %q has unsupported dtype %s (want BF16, F16 or F32)", ref.shard.name, spec.Name, ref.info.DType)
		}
	}
	return nil
}

func sameShape(got []uint64, want []int) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != uint64(want[i]) {
			return false
		}
	}
	return true
}

// mapShard maps dir/name read-only after checking that the file is at least
// as long as its safetensors header says.
func mapShard(dir, name string) (*shard, error) {
	path := filepath.Join(dir, name)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("missing shard file %s", name)
	} else if err != nil {
		return nil, fmt.Errorf("open shard: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat shard: %w", err)
	}
	size := st.Size()
	if size < 8 {
		return nil, fmt.Errorf("truncated safetensors file %s: %d bytes, shorter than the 8-byte header length", name, size)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", path, err)
	}
	return &shard{name: name, mmap: m}, nil
}

// header parses the shard's safetensors header and checks that the data
// region is exactly as long as the header declares.
func (s *shard) header() (safetensors.Metadata, error) {
	n, md, err := safetensors.ReadMetadata(s.mmap)
	if err != nil {
		return safetensors.Metadata{}, s.diagnose(err)
	}
	s.data = s.mmap[8+n:]
	return md, nil
}

// diagnose turns the library's error for a header it rejected into one that
// says what is wrong with the file, truncation in particular.
func (s *shard) diagnose(libErr error) error {
	size := uint64(len(s.mmap))
	n := binary.LittleEndian.Uint64(s.mmap[:8])
	if n > size-8 {
		return fmt.Errorf("truncated safetensors file %s: the header declares %d header bytes but the file has %d bytes after the length prefix", s.name, n, size-8)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(s.mmap[8:8+n], &raw); err != nil {
		return fmt.Errorf("safetensors file %s: invalid header: %w", s.name, libErr)
	}
	var end uint64
	for k, v := range raw {
		if k == "__metadata__" {
			continue
		}
		var t struct {
			DataOffsets [2]uint64 `json:"data_offsets"`
		}
		if json.Unmarshal(v, &t) == nil {
			end = max(end, t.DataOffsets[1])
		}
	}
	switch have := size - 8 - n; {
	case have < end:
		return fmt.Errorf("truncated safetensors file %s: the header declares %d bytes of tensor data, the file has %d", s.name, end, have)
	case have > end:
		return fmt.Errorf("safetensors file %s: %d bytes after the declared %d bytes of tensor data: %w", s.name, have-end, end, libErr)
	}
	return fmt.Errorf("safetensors file %s: %w", s.name, libErr)
}

// Close unmaps every shard. The Checkpoint must not be used afterwards.
func (c *Checkpoint) Close() error {
	var errs []error
	for _, s := range c.shards {
		if s.mmap != nil {
			if err := unix.Munmap(s.mmap); err != nil {
				errs = append(errs, fmt.Errorf("munmap %s: %w", s.name, err))
			}
			s.mmap, s.data = nil, nil
		}
	}
	c.shards, c.tensors = nil, nil
	return errors.Join(errs...)
}

func (c *Checkpoint) lookup(name string) (tensorRef, error) {
	ref, ok := c.tensors[name]
	if !ok {
		return tensorRef{}, fmt.Errorf("checkpoint %s: no tensor %q", c.Dir, name)
	}
	return ref, nil
}

// DType returns the tensor's safetensors dtype: "BF16", "F16" or "F32" for
// every tensor of Config.TensorSpecs().
func (c *Checkpoint) DType(name string) (string, error) {
	ref, err := c.lookup(name)
	if err != nil {
		return "", err
	}
	return ref.info.DType.String(), nil
}

// Shape returns the tensor's shape as stored.
func (c *Checkpoint) Shape(name string) ([]int, error) {
	ref, err := c.lookup(name)
	if err != nil {
		return nil, err
	}
	shape := make([]int, len(ref.info.Shape))
	for i, d := range ref.info.Shape {
		shape[i] = int(d)
	}
	return shape, nil
}

// ReadF32 decodes the tensor (row-major) into dst, whose length must equal
// the tensor's element count. BF16 and F16 widen exactly.
func (c *Checkpoint) ReadF32(name string, dst []float32) error {
	ref, err := c.lookup(name)
	if err != nil {
		return err
	}
	n := 1
	for _, d := range ref.info.Shape {
		n *= int(d)
	}
	if len(dst) != n {
		return fmt.Errorf("read tensor %q: dst has %d elements, tensor has %d (shape %v)", name, len(dst), n, ref.info.Shape)
	}
	b := ref.shard.data[ref.info.DataOffsets[0]:ref.info.DataOffsets[1]]
	switch ref.info.DType {
	case safetensors.BF16:
		for i := range dst {
			dst[i] = half.BF16ToF32(binary.LittleEndian.Uint16(b[2*i:]))
		}
	case safetensors.F16:
		t := half.F16Table()
		for i := range dst {
			dst[i] = t[binary.LittleEndian.Uint16(b[2*i:])]
		}
	case safetensors.F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	default:
		return fmt.Errorf("%s: tensor %q has unsupported dtype %s (want BF16, F16 or F32)", ref.shard.name, name, ref.info.DType)
	}
	return nil
}

// Metadata returns the safetensors __metadata__ of the first shard (empty
// when it has none). The map must not be modified.
func (c *Checkpoint) Metadata() map[string]string {
	if c.meta == nil {
		return map[string]string{}
	}
	return c.meta
}

// Files lists the safetensors files, relative to Dir, sorted.
func (c *Checkpoint) Files() []string {
	files := make([]string, len(c.shards))
	for i, s := range c.shards {
		files[i] = s.name
	}
	return files
}
