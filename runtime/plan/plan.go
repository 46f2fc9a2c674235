// Package plan describes a model's forward pass once, as data: a short
// list of typed instructions over named buffers, each stating its shapes
// with a token dimension T (T = 1 for a decode step, T = prompt length for
// a batched prefill), the instructions it depends on, and whether it reads
// the routed expert rows. Backends execute plans: the engine interprets one
// on any backend op by op (runtime/engine, the oracle on the CPU), and a
// device backend may capture or interpret the same list (a CUDA graph, a
// persistent kernel reading it as an instruction table).
//
// The instruction granularity is that of a fused device kernel, the size
// Hazy Research's megakernel uses (rms+qkv+rope, upgate+silu,
// rms+lm_head): large enough that a persistent kernel runs one instruction
// as one unit of work, small enough that each reads one weight matrix
// family, so that a loader can stream the next instruction's weights while
// the current one computes. For one layer of OLMoE or Qwen2-MoE:
//
//	attn-in          x -> xn = rmsnorm(x)·input_norm; q,k,v = W xn (+b);
//	                 q,k = rmsnorm·q/k_norm (OLMoE); rope(pos); K,V[pos..] = k,v
//	attention        q, K[0..pos+T), V -> att (causal)
//	attn-out         x = x + Wo·att
//	route            xn = rmsnorm(x)·post_norm; router logits; top-A group
//	routed-experts   moe = Σ_k w_k · down_k(silu(gate_k xn) ⊙ up_k xn)   (reads routed rows)
//	shared-expert    moe = moe + sigmoid(w_mix·xn) · shared(xn)          (Qwen)
//	moe-residual     x = x + moe
//
// and around the layers embed (x = E[tok]) and head (logits =
// W_lm·rmsnorm(x)·norm) with select (greedy next token, EOS masked).
//
// routed-experts is one instruction, not a gate/up and a down: the
// executor strategy (runtime/executor) owns the schedule inside the routed
// group. scalar-v1 interleaves each expert's gate, up and down, grouped-v1
// runs the group's gate/up and then its down; forcing a split into the plan
// would force grouped-v1's schedule on every strategy. A device backend
// that overlaps the misses' copies with the hits' gate/up splits it
// itself, inside the instruction.
//
// The plan holds no tensors: buffers and weights are names (a layer's
// weights are addressed by the instruction's Layer), and the executor of a
// plan binds them to its own storage. So this package depends on the model
// configuration only, and every backend can import it without importing
// the engine.
package plan

import (
	"fmt"
	"strings"

	"github.com/horizon-runmap/horizon/runtime/model"
)

// Op is an instruction kind.
type Op int

// The instruction set, in the order a layer issues them.
const (
	OpEmbed Op = iota
	OpAttnIn
	OpAttention
	OpAttnOut
	OpRoute
	OpRoutedExperts
	OpSharedExpert
	OpMoEResidual
	OpHead
	OpSelect
)

var opNames = [...]string{"embed", "attn-in", "attention", "attn-out", "route", "routed-experts",
	"shared-expert", "moe-residual", "head", "select"}

func (o Op) String() string {
	if o < 0 || int(o) >= len(opNames) {
		return fmt.Sprintf("op(%d)", int(o))
	}
	return opNames[o]
}

// Buf names a buffer of the step. KV caches are per layer (the operand's
// Layer says which); every other buffer is shared by the layers, as in
// llama2.c's RunState.
type Buf string

// The step's buffers.
const (
	BufToken  Buf = "token"  // [T] input token ids (host or device)
	BufX      Buf = "x"      // [T, D] residual stream
	BufXN     Buf = "xn"     // [T, D] normalised residual (attention input, then MoE input)
	BufQ      Buf = "q"      // [T, Hq*hd]
	BufKV     Buf = "kv"     // [maxSeq, Hkv*hd] x 2: the layer's K and V caches
	BufAtt    Buf = "att"    // [T, Hq*hd] attention output
	BufGroup  Buf = "group"  // [T, A] routed expert ids and weights
	BufMoE    Buf = "moe"    // [T, D] MoE output before the residual
	BufLogits Buf = "logits" // [T, V] (the head runs on the last token only: [1, V])
	BufNext   Buf = "next"   // [1] the selected token id
)

// Operand is one buffer an instruction reads or writes, with its shape.
type Operand struct {
	Buf   Buf
	Layer int   // for BufKV: the layer; -1 otherwise
	Shape []int // row-major dims with T expanded
}

func (o Operand) String() string {
	name := string(o.Buf)
	if o.Layer >= 0 {
		name = fmt.Sprintf("%s[%d]", o.Buf, o.Layer)
	}
	dims := make([]string, len(o.Shape))
	for i, d := range o.Shape {
		dims[i] = fmt.Sprint(d)
	}
	return name + "[" + strings.Join(dims, ",") + "]"
}

// Instr is one instruction.
type Instr struct {
	Op    Op
	Layer int // the layer whose weights it reads; -1 for embed, head, select
	Reads []Operand
	// Writes are the buffers it writes. An instruction that updates a
	// buffer in place (x = x + ...) lists it in both.
	Writes []Operand
	// Deps are the indices of earlier instructions this one must follow:
	// the last writer of every buffer it reads or writes (read after write,
	// write after write) and every reader of a buffer it writes since that
	// buffer's last write (write after read).
	Deps []int
	// RoutedRows is set when the instruction reads the expert rows of the
	// group its layer routed: the point where a residency cache must have
	// published the group (and where a misses' copy can overlap compute).
	RoutedRows bool
}

// Options choose what one plan covers.
type Options struct {
	// T is the number of tokens the step runs (1 for decode).
	T int
	// MaxSeq is the KV cache length, for the cache operands' shape.
	MaxSeq int
	// Head adds head and select: the step ends in logits and a greedy next
	// token. Prompt positions before the last need neither.
	Head bool
}

// Plan is one step's instruction list.
type Plan struct {
	Config model.Config
	T      int
	Head   bool
	Instrs []Instr
}

// Build writes the plan of one step of cfg's forward pass.
func Build(cfg model.Config, o Options) (*Plan, error) {
	if o.T < 1 {
		return nil, fmt.Errorf("plan: T = %d tokens, want at least 1", o.T)
	}
	if o.MaxSeq < o.T {
		return nil, fmt.Errorf("plan: a KV cache of %d positions cannot hold a step of %d tokens", o.MaxSeq, o.T)
	}
	if cfg.NumLayers < 1 || cfg.HiddenSize < 1 || cfg.NumHeads < 1 || cfg.NumKVHeads < 1 || cfg.TopK < 1 {
		return nil, fmt.Errorf("plan: incomplete model configuration (%d layers, hidden %d, %d/%d heads, top-%d)",
			cfg.NumLayers, cfg.HiddenSize, cfg.NumHeads, cfg.NumKVHeads, cfg.TopK)
	}
	T, D, Q, KV := o.T, cfg.HiddenSize, cfg.NumHeads*cfg.HeadDim(), cfg.KVDim()
	op := func(b Buf, dims ...int) Operand { return Operand{Buf: b, Layer: -1, Shape: dims} }
	kv := func(l int) Operand { return Operand{Buf: BufKV, Layer: l, Shape: []int{2, o.MaxSeq, KV}} }
	p := &Plan{Config: cfg, T: T, Head: o.Head}
	add := func(in Instr) { p.Instrs = append(p.Instrs, in) }

	add(Instr{Op: OpEmbed, Layer: -1, Reads: []Operand{op(BufToken, T)}, Writes: []Operand{op(BufX, T, D)}})
	for l := 0; l < cfg.NumLayers; l++ {
		add(Instr{Op: OpAttnIn, Layer: l, Reads: []Operand{op(BufX, T, D)},
			Writes: []Operand{op(BufXN, T, D), op(BufQ, T, Q), kv(l)}})
		add(Instr{Op: OpAttention, Layer: l, Reads: []Operand{op(BufQ, T, Q), kv(l)}, Writes: []Operand{op(BufAtt, T, Q)}})
		add(Instr{Op: OpAttnOut, Layer: l, Reads: []Operand{op(BufAtt, T, Q), op(BufX, T, D)}, Writes: []Operand{op(BufX, T, D)}})
		add(Instr{Op: OpRoute, Layer: l, Reads: []Operand{op(BufX, T, D)},
			Writes: []Operand{op(BufXN, T, D), op(BufGroup, T, cfg.TopK)}})
		add(Instr{Op: OpRoutedExperts, Layer: l, Reads: []Operand{op(BufXN, T, D), op(BufGroup, T, cfg.TopK)},
			Writes: []Operand{op(BufMoE, T, D)}, RoutedRows: true})
		if cfg.HasSharedExpert() {
			add(Instr{Op: OpSharedExpert, Layer: l, Reads: []Operand{op(BufXN, T, D), op(BufMoE, T, D)},
				Writes: []Operand{op(BufMoE, T, D)}})
		}
		add(Instr{Op: OpMoEResidual, Layer: l, Reads: []Operand{op(BufMoE, T, D), op(BufX, T, D)}, Writes: []Operand{op(BufX, T, D)}})
	}
	if o.Head {
		add(Instr{Op: OpHead, Layer: -1, Reads: []Operand{op(BufX, T, D)}, Writes: []Operand{op(BufLogits, 1, cfg.VocabSize)}})
		add(Instr{Op: OpSelect, Layer: -1, Reads: []Operand{op(BufLogits, 1, cfg.VocabSize)}, Writes: []Operand{op(BufNext, 1)}})
	}
	p.linkDeps()
	return p, nil
}

// key identifies a buffer instance (the KV caches are per layer).
type key struct {
	buf   Buf
	layer int
}

// linkDeps fills every instruction's Deps from its operands.
func (p *Plan) linkDeps() {
	lastWrite := map[key]int{}
	readsSince := map[key][]int{}
	for i := range p.Instrs {
		in := &p.Instrs[i]
		deps := map[int]bool{}
		for _, r := range in.Reads {
			if w, ok := lastWrite[key{r.Buf, r.Layer}]; ok {
				deps[w] = true
			}
		}
		for _, w := range in.Writes {
			k := key{w.Buf, w.Layer}
			if j, ok := lastWrite[k]; ok {
				deps[j] = true
			}
			for _, j := range readsSince[k] {
				if j != i {
					deps[j] = true
				}
			}
		}
		for j := 0; j < i; j++ {
			if deps[j] {
				in.Deps = append(in.Deps, j)
			}
		}
		for _, r := range in.Reads {
			k := key{r.Buf, r.Layer}
			readsSince[k] = append(readsSince[k], i)
		}
		for _, w := range in.Writes {
			k := key{w.Buf, w.Layer}
			lastWrite[k] = i
			readsSince[k] = nil
		}
	}
}

// Count returns how many instructions of kind op the plan holds.
func (p *Plan) Count(op Op) int {
	n := 0
	for _, in := range p.Instrs {
		if in.Op == op {
			n++
		}
	}
	return n
}

// String lists the plan, one instruction a line:
//
//	5 L0 route           x[1,64] -> xn[1,64] group[1,2]  after 4
func (p *Plan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "plan %s T=%d head=%v: %d instructions\n", p.Config.Arch, p.T, p.Head, len(p.Instrs))
	for i, in := range p.Instrs {
		layer := "  "
		if in.Layer >= 0 {
			layer = fmt.Sprintf("L%d", in.Layer)
		}
		var rd, wr []string
		for _, o := range in.Reads {
			rd = append(rd, o.String())
		}
		for _, o := range in.Writes {
			wr = append(wr, o.String())
		}
		deps := make([]string, len(in.Deps))
		for j, d := range in.Deps {
			deps[j] = fmt.Sprint(d)
		}
		after := strings.Join(deps, ",")
		if after == "" {
			after = "-"
		}
		rows := ""
		if in.RoutedRows {
			rows = "  [routed rows]"
		}
		fmt.Fprintf(&b, "%3d %-3s %-14s %s -> %s  after %s%s\n", i, layer, in.Op, strings.Join(rd, " "), strings.Join(wr, " "), after, rows)
	}
	return b.String()
}
