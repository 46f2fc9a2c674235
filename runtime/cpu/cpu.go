// Package cpu is the pure-Go reference backend: the oracle every other
// backend is checked against. It is always built and needs no toolchain
// beyond Go.
//
// Numerics: weights arrive as FP16 (non-routed tensors, FP16 expert records)
// or qpack-int4-b256-v1 (INT4 expert records); activations are FP32 and every
// dot product accumulates in FP32 in index order. FP16 weights are decoded to
// FP32 once at upload; INT4 expert rows are read packed, never expanded.
// Large matvecs are split by rows across goroutines, which leaves each
// output's reduction order unchanged, so results do not depend on the number
// of cores.
package cpu

import (
	"fmt"
	"math"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/half"
)

// Backend implements backend.Backend in plain Go.
type Backend struct {
	workers int
	// devRoute: batched prefill routes on the "device" (routed.go;
	// SetDeviceRouting), for the engine's tests of that path.
	devRoute bool
	// attnIn: the engine's batched prefill calls QKRoPEKVRows
	// (rowops.go; SetAttnInRows), for the engine's tests of that path.
	attnIn bool
	// expertAct16: ExpertMatMul rounds its INT4 matrices' activation rows
	// as half.RowShiftF16 does (SetExpertActivations, activations.go).
	expertAct16 bool
}

// New returns a CPU backend that uses up to workers goroutines per op
// (0 means GOMAXPROCS).
func New(workers int) *Backend {
	if workers <= 0 {
		workers = defaultWorkers()
	}
	return &Backend{workers: workers}
}

var _ backend.Backend = (*Backend)(nil)

// Name implements backend.Backend.
func (b *Backend) Name() string { return "cpu" }

// ActivationDType implements backend.Backend: the reference keeps
// activations in FP32.
func (b *Backend) ActivationDType() string { return "FP32" }

// Synchronous reports that every op has completed when it returns
// (backend.Synchronous).
func (b *Backend) Synchronous() bool { return true }

// vec is an FP32 buffer: activations and decoded FP16 weights.
type vec struct {
	data  []float32
	dt    backend.DType
	freed bool
}

func (v *vec) Len() int             { return len(v.data) }
func (v *vec) DType() backend.DType { return v.dt }

// raw is a byte buffer standing in for a device row.
type raw struct {
	data  []byte
	freed bool
}

func (r *raw) Len() int             { return len(r.data) }
func (r *raw) DType() backend.DType { return backend.Bytes }

func f32s(name string, t backend.Tensor) ([]float32, error) {
	v, ok := t.(*vec)
	if !ok || v == nil {
		return nil, fmt.Errorf("cpu: %s: not a CPU float tensor (%T)", name, t)
	}
	if v.freed {
		return nil, fmt.Errorf("cpu: %s: use after free", name)
	}
	return v.data, nil
}

func bytesOf(name string, t backend.Tensor) ([]byte, error) {
	r, ok := t.(*raw)
	if !ok || r == nil {
		return nil, fmt.Errorf("cpu: %s: not a CPU byte tensor (%T)", name, t)
	}
	if r.freed {
		return nil, fmt.Errorf("cpu: %s: use after free", name)
	}
	return r.data, nil
}

func shapeErr(op string, format string, args ...any) error {
	return fmt.Errorf("cpu: %s: %s: %w", op, fmt.Sprintf(format, args...), backend.ErrShape)
}

// UploadF16 implements backend.Backend; the weights are decoded to FP32 once.
func (b *Backend) UploadF16(data []uint16) (backend.Tensor, error) {
	out := make([]float32, len(data))
	tbl := half.F16Table()
	for i, h := range data {
		out[i] = tbl[h]
	}
	return &vec{data: out, dt: backend.F16}, nil
}

// AllocF16 implements backend.Backend. Like the FP16 weights (UploadF16),
// an FP16 buffer holds its values decoded to FP32: every value stored in
// it (KVAppend) is first rounded to FP16, so what Attention reads is what
// a device reads from a binary16 cache.
func (b *Backend) AllocF16(n int) (backend.Tensor, error) {
	if n < 0 {
		return nil, fmt.Errorf("cpu: AllocF16(%d): negative size", n)
	}
	return &vec{data: make([]float32, n), dt: backend.F16}, nil
}

// AllocBytes implements backend.Backend.
func (b *Backend) AllocBytes(n int) (backend.Tensor, error) {
	if n < 0 {
		return nil, fmt.Errorf("cpu: AllocBytes(%d): negative size", n)
	}
	return &raw{data: make([]byte, n)}, nil
}

// WriteBytes implements backend.Backend.
func (b *Backend) WriteBytes(dst backend.Tensor, off int, src []byte) error {
	d, err := bytesOf("WriteBytes dst", dst)
	if err != nil {
		return err
	}
	if off < 0 || off+len(src) > len(d) {
		return shapeErr("WriteBytes", "write [%d,%d) outside buffer of %d bytes", off, off+len(src), len(d))
	}
	copy(d[off:], src)
	return nil
}

// Alloc implements backend.Backend.
func (b *Backend) Alloc(n int) (backend.Tensor, error) {
	if n < 0 {
		return nil, fmt.Errorf("cpu: Alloc(%d): negative size", n)
	}
	return &vec{data: make([]float32, n), dt: backend.F32}, nil
}

// ReadF32 implements backend.Backend.
func (b *Backend) ReadF32(src backend.Tensor, dst []float32) error {
	s, err := f32s("ReadF32 src", src)
	if err != nil {
		return err
	}
	if len(dst) != len(s) {
		return shapeErr("ReadF32", "dst has %d elements, src %d", len(dst), len(s))
	}
	copy(dst, s)
	return nil
}

// WriteF32 implements backend.Backend.
func (b *Backend) WriteF32(dst backend.Tensor, src []float32) error {
	d, err := f32s("WriteF32 dst", dst)
	if err != nil {
		return err
	}
	if len(dst.(*vec).data) != len(src) {
		return shapeErr("WriteF32", "dst has %d elements, src %d", len(d), len(src))
	}
	copy(d, src)
	return nil
}

// Free implements backend.Backend.
func (b *Backend) Free(t backend.Tensor) error {
	switch v := t.(type) {
	case *vec:
		if v.freed {
			return fmt.Errorf("cpu: double free")
		}
		v.freed, v.data = true, nil
	case *raw:
		if v.freed {
			return fmt.Errorf("cpu: double free")
		}
		v.freed, v.data = true, nil
	default:
		return fmt.Errorf("cpu: Free: not a CPU tensor (%T)", t)
	}
	return nil
}

// Embed implements backend.Backend.
func (b *Backend) Embed(dst, table backend.Tensor, tok int) error {
	d, err := f32s("Embed dst", dst)
	if err != nil {
		return err
	}
	t, err := f32s("Embed table", table)
	if err != nil {
		return err
	}
	n := len(d)
	if n == 0 || len(t)%n != 0 {
		return shapeErr("Embed", "table of %d values is not [V, %d]", len(t), n)
	}
	if tok < 0 || tok >= len(t)/n {
		return fmt.Errorf("cpu: Embed: token %d outside vocabulary of %d", tok, len(t)/n)
	}
	copy(d, t[tok*n:(tok+1)*n])
	return nil
}

// RMSNorm implements backend.Backend.
func (b *Backend) RMSNorm(dst, x, w backend.Tensor, eps float32) error {
	d, err := f32s("RMSNorm dst", dst)
	if err != nil {
		return err
	}
	xs, err := f32s("RMSNorm x", x)
	if err != nil {
		return err
	}
	ws, err := f32s("RMSNorm w", w)
	if err != nil {
		return err
	}
	g := len(ws)
	if len(d) != len(xs) || g == 0 || len(xs)%g != 0 {
		return shapeErr("RMSNorm", "dst %d, x %d, w %d", len(d), len(xs), g)
	}
	for lo := 0; lo < len(xs); lo += g {
		var ss float32
		for _, v := range xs[lo : lo+g] {
			ss += v * v
		}
		inv := float32(1 / math.Sqrt(float64(ss/float32(g)+eps)))
		for i := 0; i < g; i++ {
			d[lo+i] = ws[i] * (xs[lo+i] * inv)
		}
	}
	return nil
}

// MatVec implements backend.Backend.
func (b *Backend) MatVec(dst, w, x, bias backend.Tensor) error {
	d, err := f32s("MatVec dst", dst)
	if err != nil {
		return err
	}
	ws, err := f32s("MatVec w", w)
	if err != nil {
		return err
	}
	xs, err := f32s("MatVec x", x)
	if err != nil {
		return err
	}
	rows, cols := len(d), len(xs)
	if rows*cols != len(ws) {
		return shapeErr("MatVec", "W has %d values, want [%d, %d]", len(ws), rows, cols)
	}
	var bs []float32
	if bias != nil {
		if bs, err = f32s("MatVec bias", bias); err != nil {
			return err
		}
		if len(bs) != rows {
			return shapeErr("MatVec", "bias has %d values, want %d", len(bs), rows)
		}
	}
	parallelRows(rows, rows*cols, b.workers, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			s := dot(ws[r*cols:(r+1)*cols], xs)
			if bs != nil {
				s += bs[r]
			}
			d[r] = s
		}
	})
	return nil
}

// dot is the CPU reference's FP32 dot product. Its reduction order is
// fixed: four interleaved partial sums (element i goes to sum i mod 4),
// combined as (s0+s1)+(s2+s3), then the tail in index order. Four
// independent chains keep the FPU busy; the order never depends on the
// number of workers.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	s := (s0 + s1) + (s2 + s3)
	for ; i < len(a); i++ {
		s += a[i] * b[i]
	}
	return s
}

// RoPE implements backend.Backend.
func (b *Backend) RoPE(x backend.Tensor, nHeads, headDim, pos int, theta float64) error {
	xs, err := f32s("RoPE x", x)
	if err != nil {
		return err
	}
	if nHeads*headDim != len(xs) || headDim%2 != 0 {
		return shapeErr("RoPE", "x has %d values, want %d heads x %d", len(xs), nHeads, headDim)
	}
	cos, sin := ropeTable(headDim, pos, theta)
	half := headDim / 2
	for h := 0; h < nHeads; h++ {
		v := xs[h*headDim : (h+1)*headDim]
		for i := 0; i < half; i++ {
			a, c := v[i], v[i+half]
			v[i] = a*cos[i] - c*sin[i]
			v[i+half] = c*cos[i] + a*sin[i]
		}
	}
	return nil
}

// ropeTable computes cos/sin of pos*inv_freq the way transformers does: the
// inverse frequencies and their product with the position in FP32.
func ropeTable(headDim, pos int, theta float64) (cos, sin []float32) {
	half := headDim / 2
	cos, sin = make([]float32, half), make([]float32, half)
	for i := 0; i < half; i++ {
		exp := float32(2*i) / float32(headDim)
		invFreq := float32(1) / float32(math.Pow(theta, float64(exp)))
		f := float32(pos) * invFreq
		cos[i] = float32(math.Cos(float64(f)))
		sin[i] = float32(math.Sin(float64(f)))
	}
	return cos, sin
}

// KVAppend implements backend.Backend.
func (b *Backend) KVAppend(kCache, vCache, k, v backend.Tensor, pos int) error {
	kc, err := f32s("KVAppend kCache", kCache)
	if err != nil {
		return err
	}
	vc, err := f32s("KVAppend vCache", vCache)
	if err != nil {
		return err
	}
	ks, err := f32s("KVAppend k", k)
	if err != nil {
		return err
	}
	vs, err := f32s("KVAppend v", v)
	if err != nil {
		return err
	}
	n := len(ks)
	if len(vs) != n || len(kc) != len(vc) || n == 0 || (pos+1)*n > len(kc) || pos < 0 {
		return shapeErr("KVAppend", "position %d of a cache of %d values with rows of %d", pos, len(kc), n)
	}
	switch kt, vt := kCache.DType(), vCache.DType(); {
	case kt != vt || (kt != backend.F32 && kt != backend.F16):
		return shapeErr("KVAppend", "caches of %v and %v: want both F32 or both F16", kt, vt)
	case kt == backend.F16:
		for j := 0; j < n; j++ {
			kc[pos*n+j] = half.F16ToF32(half.F32ToF16(ks[j]))
			vc[pos*n+j] = half.F16ToF32(half.F32ToF16(vs[j]))
		}
		return nil
	}
	copy(kc[pos*n:], ks)
	copy(vc[pos*n:], vs)
	return nil
}

// Attention implements backend.Backend.
func (b *Backend) Attention(dst, q, kCache, vCache backend.Tensor, n, nHeads, nKVHeads, headDim int) error {
	d, err := f32s("Attention dst", dst)
	if err != nil {
		return err
	}
	qs, err := f32s("Attention q", q)
	if err != nil {
		return err
	}
	kc, err := f32s("Attention kCache", kCache)
	if err != nil {
		return err
	}
	vc, err := f32s("Attention vCache", vCache)
	if err != nil {
		return err
	}
	kvDim := nKVHeads * headDim
	if len(qs) != nHeads*headDim || len(d) != len(qs) || nKVHeads <= 0 || nHeads%nKVHeads != 0 || n <= 0 || n*kvDim > len(kc) {
		return shapeErr("Attention", "q %d, dst %d, %d heads / %d kv heads x %d over %d positions of a %d-value cache",
			len(qs), len(d), nHeads, nKVHeads, headDim, n, len(kc))
	}
	group := nHeads / nKVHeads
	scale := float32(1 / math.Sqrt(float64(headDim)))
	parallelRows(nHeads, nHeads*n*headDim*2, b.workers, func(lo, hi int) {
		scores := make([]float32, n)
		for h := lo; h < hi; h++ {
			qh := qs[h*headDim : (h+1)*headDim]
			off := (h / group) * headDim
			maxv := float32(math.Inf(-1))
			for t := 0; t < n; t++ {
				s := dot(qh, kc[t*kvDim+off:t*kvDim+off+headDim]) * scale
				scores[t] = s
				if s > maxv {
					maxv = s
				}
			}
			var sum float32
			for t := range scores {
				e := float32(math.Exp(float64(scores[t] - maxv)))
				scores[t] = e
				sum += e
			}
			out := d[h*headDim : (h+1)*headDim]
			clear(out)
			for t := 0; t < n; t++ {
				p := scores[t] / sum
				vt := vc[t*kvDim+off : t*kvDim+off+headDim]
				for i := range out {
					out[i] += p * vt[i]
				}
			}
		}
	})
	return nil
}

// SiLUMul implements backend.Backend.
func (b *Backend) SiLUMul(dst, gate, up backend.Tensor) error {
	d, err := f32s("SiLUMul dst", dst)
	if err != nil {
		return err
	}
	g, err := f32s("SiLUMul gate", gate)
	if err != nil {
		return err
	}
	u, err := f32s("SiLUMul up", up)
	if err != nil {
		return err
	}
	if len(d) != len(g) || len(g) != len(u) {
		return shapeErr("SiLUMul", "dst %d, gate %d, up %d", len(d), len(g), len(u))
	}
	for i, v := range g {
		d[i] = v / (1 + float32(math.Exp(float64(-v)))) * u[i]
	}
	return nil
}

// Add implements backend.Backend.
func (b *Backend) Add(dst, x, y backend.Tensor) error {
	d, err := f32s("Add dst", dst)
	if err != nil {
		return err
	}
	xs, err := f32s("Add a", x)
	if err != nil {
		return err
	}
	ys, err := f32s("Add b", y)
	if err != nil {
		return err
	}
	if len(d) != len(xs) || len(xs) != len(ys) {
		return shapeErr("Add", "dst %d, a %d, b %d", len(d), len(xs), len(ys))
	}
	for i := range d {
		d[i] = xs[i] + ys[i]
	}
	return nil
}

// AddScaled implements backend.Backend.
func (b *Backend) AddScaled(dst, x backend.Tensor, alpha float32) error {
	d, err := f32s("AddScaled dst", dst)
	if err != nil {
		return err
	}
	xs, err := f32s("AddScaled x", x)
	if err != nil {
		return err
	}
	if len(d) != len(xs) {
		return shapeErr("AddScaled", "dst %d, x %d", len(d), len(xs))
	}
	for i, v := range xs {
		d[i] += alpha * v
	}
	return nil
}

// AddGated implements backend.Backend.
func (b *Backend) AddGated(dst, x, g backend.Tensor) error {
	gs, err := f32s("AddGated g", g)
	if err != nil {
		return err
	}
	if len(gs) != 1 {
		return shapeErr("AddGated", "gate has %d values, want 1", len(gs))
	}
	s := float32(1 / (1 + math.Exp(float64(-gs[0]))))
	return b.AddScaled(dst, x, s)
}

// TopK implements backend.Backend.
func (b *Backend) TopK(logits backend.Tensor, k int, norm bool) ([]int, []float32, error) {
	ls, err := f32s("TopK logits", logits)
	if err != nil {
		return nil, nil, err
	}
	if k <= 0 || k > len(ls) {
		return nil, nil, shapeErr("TopK", "k %d over %d logits", k, len(ls))
	}
	probs := softmax(ls)
	ids, ws := topK(probs, k)
	if norm {
		var s float32
		for _, w := range ws {
			s += w
		}
		for i := range ws {
			ws[i] /= s
		}
	}
	return ids, ws, nil
}

// softmax in FP32 with the maximum subtracted.
func softmax(x []float32) []float32 {
	maxv := float32(math.Inf(-1))
	for _, v := range x {
		maxv = max(maxv, v)
	}
	out := make([]float32, len(x))
	var sum float32
	for i, v := range x {
		out[i] = float32(math.Exp(float64(v - maxv)))
		sum += out[i]
	}
	for i := range out {
		out[i] /= sum
	}
	return out
}

// topK selects the k largest values, descending, ties to the lower index.
func topK(p []float32, k int) ([]int, []float32) {
	ids := make([]int, 0, k)
	ws := make([]float32, 0, k)
	taken := make([]bool, len(p))
	for len(ids) < k {
		best := -1
		for i, v := range p {
			if !taken[i] && (best < 0 || v > p[best]) {
				best = i
			}
		}
		taken[best] = true
		ids = append(ids, best)
		ws = append(ws, p[best])
	}
	return ids, ws
}

// Argmax implements backend.Backend.
func (b *Backend) Argmax(logits backend.Tensor, masked []int) (int, error) {
	ls, err := f32s("Argmax logits", logits)
	if err != nil {
		return 0, err
	}
	skip := make(map[int]bool, len(masked))
	for _, m := range masked {
		skip[m] = true
	}
	best := -1
	for i, v := range ls {
		if skip[i] || math.IsNaN(float64(v)) {
			continue
		}
		if best < 0 || v > ls[best] {
			best = i
		}
	}
	if best < 0 {
		return 0, fmt.Errorf("cpu: Argmax: every one of %d logits is masked or NaN", len(ls))
	}
	return best, nil
}
