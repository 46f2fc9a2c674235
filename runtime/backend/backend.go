// Package backend defines the op-level interface every compute backend
// implements (the pure-Go CPU reference in runtime/cpu, the CUDA backend in
// runtime/cuda) and the conformance suite that checks each op of a backend
// against the CPU reference.
//
// The model is llama2.c's: a forward pass is a fixed sequence of small ops
// over buffers allocated once and named by role. A backend owns its buffers
// (Tensor values); the engine never looks inside them except through ReadF32.
// Ops may run asynchronously on a backend's compute stream; ReadF32, TopK and
// Argmax return host values and therefore synchronise.
//
// Shapes use the legend D hidden, F expert FFN, S shared FFN, E experts,
// A active experts (top-k), V vocab, T positions, hd head dim.
package backend

import (
	"errors"

	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// DType is the element type of a Tensor.
type DType int

const (
	// F32 activations and scratch on the CPU backend.
	F32 DType = iota
	// F16 weights (IEEE binary16 bit patterns).
	F16
	// Bytes holds raw records (qpacked or FP16 expert records).
	Bytes
)

func (d DType) String() string {
	switch d {
	case F32:
		return "F32"
	case F16:
		return "F16"
	case Bytes:
		return "bytes"
	}
	return "invalid"
}

// Tensor is a flat buffer owned by a backend. Len counts elements.
type Tensor interface {
	Len() int
	DType() DType
}

// ErrShape reports an op called with mismatched buffer sizes.
var ErrShape = errors.New("tensor shape mismatch")

// Backend is the set of ops the engine and the executors issue. Every method
// validates its arguments and returns an error rather than panicking.
type Backend interface {
	// Name is "cpu" or "cuda".
	Name() string
	// ActivationDType is the type activations are computed and stored in
	// ("FP32" or "FP16"): a fact every measurement records, separately from
	// the weights' stored types.
	ActivationDType() string

	// UploadF16 copies FP16 weights (bit patterns) into a new backend tensor.
	UploadF16(data []uint16) (Tensor, error)
	// AllocBytes allocates a byte buffer (an expert row) of n bytes.
	AllocBytes(n int) (Tensor, error)
	// WriteBytes copies src into dst at byte offset off.
	WriteBytes(dst Tensor, off int, src []byte) error
	// Alloc allocates a zeroed activation buffer of n elements.
	Alloc(n int) (Tensor, error)
	// AllocF16 allocates a zeroed FP16 buffer of n elements: the KV cache
	// when it is FP16 (engine.Options.KV). KVAppend rounds what it stores
	// there to nearest even; Attention reads it back as FP32.
	AllocF16(n int) (Tensor, error)
	// ReadF32 copies an activation buffer to the host (synchronising); an
	// FP16 buffer of AllocF16 (the KV cache) is read as its values.
	ReadF32(src Tensor, dst []float32) error
	// WriteF32 copies host values into an activation buffer.
	WriteF32(dst Tensor, src []float32) error
	// Free releases a tensor. Freeing twice is an error.
	Free(t Tensor) error

	// Embed: dst[D] = table[tok, :] for table [V, D].
	Embed(dst, table Tensor, tok int) error
	// RMSNorm: dst = x * rsqrt(mean(x²)+eps) * w, per group of len(w) values
	// (groups let one call normalise each head; OLMoE uses one group).
	RMSNorm(dst, x, w Tensor, eps float32) error
	// MatVec: dst[R] = W[R, C] · x[C] (+ bias[R] when bias is non-nil),
	// W FP16 row-major, FP32 accumulation.
	MatVec(dst, w, x, bias Tensor) error
	// ExpertMatVec: dst[m.Rows] = M · x[m.Cols] where M is the matrix m of an
	// expert record stored in rec with the given scheme (qpack INT4 rows are
	// read directly, never expanded).
	ExpertMatVec(dst, rec Tensor, m qpack.MatrixLayout, scheme qpack.Scheme, x Tensor) error
	// ExpertGateUp computes, for every expert k of a routed group in one
	// step, act[k*F:(k+1)*F] = silu(G_k·x) ⊙ (U_k·x), reading the gate and
	// up matrices from rows[k]. act holds len(rows)*F values.
	ExpertGateUp(act Tensor, rows []Tensor, l qpack.RecordLayout, x Tensor) error
	// ExpertDownCombine sets out[D] = Σ_k weights[k] · (D_k · act[k*F:]),
	// accumulating the experts in k order.
	ExpertDownCombine(out Tensor, rows []Tensor, l qpack.RecordLayout, act Tensor, weights []float32) error
	// FusedExperts is ExpertGateUp followed by ExpertDownCombine, issued as
	// one step per routed group (gate, up, activation and down fused).
	FusedExperts(out Tensor, rows []Tensor, l qpack.RecordLayout, x Tensor, weights []float32) error
	// RoPE rotates x[nHeads*hd] in place at position pos (HF rotate_half
	// convention: pairs (i, i+hd/2)).
	RoPE(x Tensor, nHeads, headDim, pos int, theta float64) error
	// KVAppend stores k and v [Hkv*hd] at position pos of the caches
	// [T, Hkv*hd]: both F32, or both F16 (each value rounded to nearest
	// even, as half.F32ToF16).
	KVAppend(kCache, vCache, k, v Tensor, pos int) error
	// Attention: dst[Hq*hd] = softmax(q·Kᵀ/√hd) · V over positions 0..n-1,
	// grouped-query (head h reads kv head h/(Hq/Hkv)).
	Attention(dst, q, kCache, vCache Tensor, n, nHeads, nKVHeads, headDim int) error
	// SiLUMul: dst = silu(gate) * up, elementwise.
	SiLUMul(dst, gate, up Tensor) error
	// Add: dst = a + b.
	Add(dst, a, b Tensor) error
	// AddScaled: dst += alpha * x.
	AddScaled(dst, x Tensor, alpha float32) error
	// AddGated: dst += sigmoid(g[0]) * x (Qwen's gated shared expert; g has
	// one element).
	AddGated(dst, x, g Tensor) error
	// TopK: softmax over logits[E] in FP32, the k largest probabilities in
	// descending order (ties: lower index first), renormalised to sum 1 when
	// norm is set. Returns host values.
	TopK(logits Tensor, k int, norm bool) (ids []int, weights []float32, err error)
	// Argmax of logits[V] with the masked ids excluded (EOS suppression);
	// ties pick the lowest id. Returns a host value.
	Argmax(logits Tensor, masked []int) (int, error)
}

// Synchronous is implemented by backends whose ops have completed on
// return (the CPU backend). The engine can then take a timing point
// between two ops of a step on the host clock: the end of prefill, the
// prompt's last logits before selection (engine.Result.PrefillSeconds). A
// backend whose ops run asynchronously (the CUDA backend) does not
// implement it, and that point stays unobserved.
type Synchronous interface {
	Synchronous() bool
}

// RowOps is implemented by a Batched backend that also runs a batched
// prefill's per-token ops over all T rows of a batch in one op each. Row t
// gets the per-token op's bits (RoPE at position pos0+t, KVAppend at
// pos0+t, Attention over positions 0..pos0+t, TopK of row t), so the
// engine may use either form.
type RowOps interface {
	// EmbedRows writes row t of dst [len(toks), D] as Embed of toks[t].
	EmbedRows(dst, table Tensor, toks []int) error
	// RoPERows rotates row t of x [T, nHeads*headDim] at position pos0+t.
	RoPERows(x Tensor, T, nHeads, headDim, pos0 int, theta float64) error
	// KVAppendRows writes rows t of k and v [T, n] at positions pos0+t.
	KVAppendRows(kCache, vCache, k, v Tensor, T, pos0 int) error
	// AttentionRows: row t of dst [T, nHeads*headDim] is Attention of row t
	// of q over positions 0..pos0+t (causal).
	AttentionRows(dst, q, kCache, vCache Tensor, T, pos0, nHeads, nKVHeads, headDim int) error
	// TopKRows is TopK of each row t of logits [T, E]: ids[t*k+r] and
	// weights[t*k+r], host values.
	TopKRows(logits Tensor, T, k int, norm bool) ([]int, []float32, error)
	// CombineRows: row t of dst [T, n] = Σ_j weights[t*k+j] · src[t*k+j]
	// for src [T*k, n], as the per-token ops leave it: the row cleared to
	// zero, then AddScaled of each of its k source rows in order.
	CombineRows(dst, src Tensor, weights []float32, T, k int) error
	// AddGatedRows is AddGated of each row t: dst[t] += sigmoid(g[t]) ·
	// x[t] for dst and x [T, n] and g [T].
	AddGatedRows(dst, x, g Tensor, T int) error
}

// AttnInRows is implemented by RowOps backends that can run a batch's q/k
// norms, RoPE and KV append as one op (CUDA: qk_norm_rope_kv_rows and
// rope_kv_rows, kernels/prefill_rows.cu).
type AttnInRows interface {
	// FusesAttnIn says whether the engine should call QKRoPEKVRows (a
	// tuning or capability of the backend; false keeps the separate ops).
	FusesAttnIn() bool
	// QKRoPEKVRows runs, for the T rows of q [T, nHeads*headDim], k and v
	// [T, nKVHeads*headDim]: with qNorm and kNorm set, RMSNorm of q by
	// qNorm's groups into qo and of k by kNorm's, then RoPE of both at
	// position pos0+t and KVAppendRows of the rotated k and of v; without
	// norms (both nil), RoPE of q in place (qo must be q) and of k, then
	// the append. The bits are RMSNorm's, RoPERows' and KVAppendRows' in
	// that order. k's own rows are left unspecified. With norms qo must
	// not alias q and each norm's length must be a multiple of headDim.
	QKRoPEKVRows(qo, q, k, v, kCache, vCache, qNorm, kNorm Tensor, T, pos0, nHeads, nKVHeads, headDim int, theta float64, eps float32) error
}

// QKRoPEKVRowsOps is QKRoPEKVRows as the separate ops of be in their order
// (RMSNorm of q into qo and of k in place when qNorm is set, RoPERows of qo
// and k, KVAppendRows): the reference, and a backend's own fallback.
func QKRoPEKVRowsOps(be Backend, ro RowOps, qo, q, k, v, kCache, vCache, qNorm, kNorm Tensor, T, pos0, nHeads, nKVHeads, headDim int, theta float64, eps float32) error {
	if qNorm != nil {
		if err := be.RMSNorm(qo, q, qNorm, eps); err != nil {
			return err
		}
		if err := be.RMSNorm(k, k, kNorm, eps); err != nil {
			return err
		}
	}
	if err := ro.RoPERows(qo, T, nHeads, headDim, pos0, theta); err != nil {
		return err
	}
	if err := ro.RoPERows(k, T, nKVHeads, headDim, pos0, theta); err != nil {
		return err
	}
	return ro.KVAppendRows(kCache, vCache, k, v, T, pos0)
}

// BatchedDefault is implemented by a backend.Batched backend whose batched
// prefill is not the faster one yet: the engine's auto prefill runs token
// at a time there unless BatchedDefault returns true (a Batched backend
// without it gets batched prefill by default).
type BatchedDefault interface {
	BatchedDefault() bool
}

// Waiter is implemented by backends whose ops run asynchronously (the CUDA
// backend): Wait returns once every op issued before it has completed, so
// the engine can take the end of a batched prefill (the prompt's last
// logits on the device) on the host clock.
type Waiter interface {
	Wait() error
}

// Viewer is implemented by backends whose tensors can be viewed in part
// without a copy (the CUDA backend). The engine then uploads the attention
// projections q|k|v (and Qwen's shared-expert gate|up|mix) as one matrix
// each, so that a captured decode step multiplies each in one launch, while
// the op-by-op step reads the parts through views: the same bytes either
// way.
type Viewer interface {
	// View returns elements [off, off+n) of t as a tensor sharing t's
	// memory. A view is never freed on its own; it lives as long as t.
	View(t Tensor, off, n int) (Tensor, error)
}

// Batched is implemented by backends that run a prompt's positions as one
// batch (the engine's batched prefill, runtime/engine/prefill.go). Each op
// computes every token's row exactly as the per-token op computes it, with
// the same reduction order, so a batched prefill gives token-at-a-time
// prefill's bits while it reads each weight row once for all the tokens
// (the conformance suite checks this). A backend may instead run them by
// default on a faster path that rounds differently (the CUDA backend's
// tensor cores), within a bound it states and tests; even then a token's
// results depend only on its own activations and the weights, never on
// which tokens share the batch, wave or launch. Activations of T tokens
// are [T, width] row-major tensors.
type Batched interface {
	// Rows returns rows [lo, lo+n) of t, a [*, width] activation tensor,
	// as a tensor sharing t's memory (so per-token ops run on a token's
	// row in place). A row view is never freed on its own.
	Rows(t Tensor, width, lo, n int) (Tensor, error)
	// MatMul: dst[t] = W · x[t] (+ bias) for the T rows of x [T, C]: each
	// row is MatVec(dst[t], W, x[t], bias), bit for bit.
	MatMul(dst, w, x, bias Tensor, T int) error
	// ExpertMatMul: dst[dstRows[i]] = M · x[xRows[i]] for every i, where M
	// is matrix m of the expert record rec: a gather of activation rows,
	// one read of M for all of them, and a scatter of the results. Each
	// row is ExpertMatVec's, bit for bit. dst is [*, m.Rows], x [*, m.Cols].
	ExpertMatMul(dst Tensor, dstRows []int, rec Tensor, m qpack.MatrixLayout, scheme qpack.Scheme, x Tensor, xRows []int) error
}

// ExpertActivations is implemented by Batched backends that can take the
// activations of the routed experts' batched matmuls (ExpertMatMul,
// ExpertMatMulGroup and DeviceRouting's RoutedMatMul and RoutedGateUp: a
// batched prefill's experts) in FP16, the seed's W4A16. With F16 every
// activation row entering an INT4 expert matrix is first rounded as
// half.RowShiftF16 rounds it (one power-of-two shift a row, then FP16,
// round to nearest even); the products and sums stay FP32. Decode steps'
// expert matvecs and every other op keep FP32 activations. F32 (the
// default) restores the FP32 activations. The engine sets it once, at Load
// (engine.LoadOptions.ExpertActivations); a backend that does not
// implement it runs FP32 only.
type ExpertActivations interface {
	SetExpertActivations(dt DType) error
}

// ExpertGroups is implemented by Batched backends that run several experts'
// matrices of one layout as one op (a prefill wave's gate, up or down).
// ExpertMatMulGroup is ExpertMatMul(dst, dstRows[j], recs[j], m, scheme, x,
// xRows[j]) for every expert j, with those calls' bits; the engine calls it
// instead of one ExpertMatMul per expert where a backend has it.
type ExpertGroups interface {
	ExpertMatMulGroup(dst Tensor, dstRows [][]int, recs []Tensor, m qpack.MatrixLayout, scheme qpack.Scheme, x Tensor, xRows [][]int) error
}

// PartMatMuls is implemented by Batched backends that multiply a matrix
// stored as row blocks [W_0; W_1; ...] (the fused q|k|v projection) in one
// op. MatMulParts sets dsts[j] = W_j · x[t] (+ bias_j) for the T rows of
// x, W_j the rows[j] rows of w after those of the blocks before it and
// bias_j the matching values of bias (nil: none), with MatMul(dsts[j],
// W_j, x, bias_j, T)'s bits.
type PartMatMuls interface {
	MatMulParts(dsts []Tensor, rows []int, w, x, bias Tensor, T int) error
}

// DenseActivations is implemented by Batched backends that can take the
// activations of a batched prefill's dense FP16 projections (attention's
// q, k, v and o; the shared expert's gate, up and down) in FP16. MatMulA16
// is MatMul with every row of x first rounded as half.ChunkShiftF16 rounds
// it (one power-of-two shift a 32-value chunk, then FP16, round to nearest
// even; x itself is left as it is); the products and sums stay FP32. The
// engine calls it in place of MatMul for those projections when they are
// declared FP16 (engine.LoadOptions.DenseActivations); the router, the
// shared expert's sigmoid gate, the head and decode steps keep FP32
// activations. A backend that does not implement it runs FP32 only.
type DenseActivations interface {
	MatMulA16(dst, w, x, bias Tensor, T int) error
}

// PartMatMulsA16 is MatMulParts on FP16 activations: each block's bits are
// MatMulA16's. Where a backend lacks it, the engine multiplies each block
// (the views of the fused weight) with MatMulA16.
type PartMatMulsA16 interface {
	MatMulPartsA16(dsts []Tensor, rows []int, w, x, bias Tensor, T int) error
}

// PrefillScope is implemented by backends that launch a batched prefill's
// ops differently from other ops. The engine calls BeginPrefill before a
// batched prefill's first op and EndPrefill after its last (on error too).
// The CUDA backend launches the ops in between with programmatic dependent
// launch (each kernel may start while the one before it finishes; the
// same bits), and the other op-by-op paths (step mode ops, token-at-a-time
// prefill) as plain launches.
type PrefillScope interface {
	BeginPrefill() error
	EndPrefill() error
}

// DeviceRouting is implemented by Batched backends that keep a batched
// prefill's routing on the device, so that the host does not wait for each
// layer's top-k before it issues the layer's expert matmuls (the read back
// of TopKRows is a round trip per layer). The engine uses it at full
// residency only: the cache's snapshot is pinned, every expert's row is
// published for the life of the cache, so the rows are read through the
// snapshot and the leases are served afterwards, only to count them
// (device.ExpertRows). Every pair gets the bits ExpertMatMulGroup gives it:
// a pair's results depend on its activations and its expert's matrix
// alone, not on which pairs share an op or in which order they are packed.
// (The engine counts a layer's leases once it has issued the next layer's
// expert ops, and the last layers' before the selection.)
type DeviceRouting interface {
	// RoutesOnDevice says whether this backend runs a batched prefill's
	// routed experts of scheme through the device routing (a tuning or
	// capability of the backend; false keeps TopKRows).
	RoutesOnDevice(scheme qpack.Scheme) bool
	// RouteRows is TopKRows without renormalisation (norm_topk_prob off)
	// whose ids and weights stay on the device: the T rows' top-k of logits
	// [T, E], grouped by expert against rows (the layer's published record
	// of every expert, indexed by expert id) and lay. The pairs of slots
	// s = t*k + j are packed in expert order, each expert's slots
	// increasing: pair p of the packing is (token t, slot s).
	RouteRows(logits Tensor, T, k int, rows []Tensor, lay qpack.RecordLayout) (Routing, error)
	// RoutedMatMul runs matrix m (the layout's gate, up or down) of every
	// pair's expert: dst[p] = M · x[t] (down false: gate or up, x [T, cols])
	// or dst[s] = M · x[p] (down: x [T*k, cols], the packed activations),
	// for every pair p = (t, s) of r.
	RoutedMatMul(dst Tensor, r Routing, m qpack.MatrixLayout, x Tensor, down bool) error
	// RoutedGateUp is RoutedMatMul of matrix g into gate and of matrix u
	// into up (down false: x [T, cols]), then SiLUMul(act, gate, up): act[p]
	// = silu(G · x[t]) * (U · x[t]) for every pair p = (t, s) of r, with
	// those three ops' bits. gate and up are scratch of act's size: a
	// backend that runs the three as one pass may leave them unwritten.
	RoutedGateUp(act, gate, up Tensor, r Routing, g, u qpack.MatrixLayout, x Tensor) error
	// CombineRouted is CombineRows with r's weights: dst[t] = the k rows
	// src[t*k + j] weighted and added in slot order from zero.
	CombineRouted(dst, src Tensor, r Routing) error
}

// Routing is one layer's device routing (DeviceRouting.RouteRows).
type Routing interface {
	// IDs waits for the routing and returns its T*k expert ids in slot
	// order (what TopKRows returns first).
	IDs() ([]int, error)
	// Release frees the routing once the ops that read it have been
	// issued (idempotent).
	Release()
}
