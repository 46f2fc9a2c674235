package cuda

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
)

// This file has no build tag: the persistent decode kernel's program is
// encoded from recorded launches by pure functions, tested without a GPU.
//
// Step mode persistent (persistent.go) records the launches the captured
// step would make (step_plan.go issues them, instruction by instruction of
// the step plan) and encodes each as one instruction of a program that
// kernels/persistent.cu interprets in one launch: the kernel's opcode, its
// grid (the instruction's units), the launch's arguments, the instruction
// it waits for and what it prefetches into L2 while it waits.

// persistentOps are the opcodes of kernels/persistent.cu (enum
// PersistentOp), in order: the kernels a captured step may launch that
// have a body in the persistent kernel. Of the row kernels one variant
// each (recordTuning makes the stepper launch exactly those).
var persistentOps = []string{
	"embed_step",
	"qk_norm_step",
	"rope_kv_step",
	"qk_norm_rope_kv_step",
	"attention_step",
	"route_step",
	"argmax_step",
	"add_gated_resid_step",
	"silu_mul_f32",
	"add_f32",
	"matvec_f16_r4_s",
	"experts_gateup_int4_p2_s_t",
	"experts_down_int4_r4_s_t",
	"experts_gateup_f16_p2_s_t",
	"experts_down_f16_r4_s_t",
}

// Layout of PInstr in kernels/persistent.cu.
const (
	pinstrBytes = 256
	pinstrArgs  = 25 // PI_ARGS
	pfRange     = 1  // PF_RANGE: prefetch pf_bytes at pf
	pfGroupRows = 2  // PF_GROUP_ROWS: pf_bytes at pf_off of each of the pf_n rows of the GroupTable at pf
)

// launchRec is one recorded kernel launch.
type launchRec struct {
	name              string
	grid, block, smem int
	args              []uint64
	tag               string // the plan instruction that issued it ("attn-in L3")
}

// pinstr is one instruction of a persistent program.
type pinstr struct {
	op, units, dep, smem int
	pfKind, pfN          int
	pf, pfBytes, pfOff   uint64
	args                 []uint64
	name                 string // the kernel, for listings and errors
	tag                  string // launchRec.tag
}

// persistentBlock is the block size of the persistent kernel, and of every
// kernel it interprets (except the one-warp route_step and argmax_step's
// 1024 threads, whose bodies do not depend on the block size: route_step
// runs on warp 0, argmax_step's result is the argmax of the whole vector
// whatever the block scans).
const persistentBlock = 256

// prefetchMaxBytes bounds a range prefetch: a matrix larger than a good
// share of L2 (50 MB on the H200) would evict what it prefetched before it
// is read (the lm_head is 206 MB at the OLMoE shape).
const prefetchMaxBytes = 24 << 20

// programOptions says how encodeProgram lays out a program.
type programOptions struct {
	// downOff and downBytes are where a routed row's down matrix lies in
	// its record.
	downOff, downBytes int
	// blocks, when > 0, is the persistent grid: instructions whose bits
	// do not depend on their grid get at most that many units (regrid).
	blocks int
	// prefetch turns the L2 prefetches on.
	prefetch bool
}

// encodeProgram turns a step's recorded launches into a program: one
// instruction per launch, in order, each waiting for the one before it.
// With o.prefetch, matvec instructions (matvec_f16_*: argument 1 the FP16
// matrix, 5 rows, 6 columns) prefetch their matrix while they wait, and a
// grouped gate/up whose next instruction is the down over the same row
// table prefetches the routed rows' down matrices once routing is done.
func encodeProgram(recs []launchRec, o programOptions) ([]pinstr, error) {
	downOff, downBytes := o.downOff, o.downBytes
	out := make([]pinstr, 0, len(recs))
	for i, r := range recs {
		op := slices.Index(persistentOps, r.name)
		if op < 0 {
			return nil, fmt.Errorf("launch %d: kernel %s has no body in the persistent kernel", i, r.name)
		}
		switch {
		case r.name == "route_step" && r.block == 32, r.name == "argmax_step" && r.block == 1024, r.block == persistentBlock:
		default:
			return nil, fmt.Errorf("launch %d (%s): block of %d threads; the persistent kernel runs blocks of %d", i, r.name, r.block, persistentBlock)
		}
		if r.grid < 1 {
			return nil, fmt.Errorf("launch %d (%s): grid of %d blocks", i, r.name, r.grid)
		}
		if len(r.args) > pinstrArgs {
			return nil, fmt.Errorf("launch %d (%s): %d arguments, an instruction holds %d", i, r.name, len(r.args), pinstrArgs)
		}
		in := pinstr{op: op, units: r.grid, dep: i - 1, smem: r.smem, args: r.args, name: r.name, tag: r.tag}
		if o.blocks > 0 {
			regrid(&in, o.blocks)
		}
		if strings.HasPrefix(r.name, "matvec_f16_") && o.prefetch {
			if bytes := 2 * r.args[5] * r.args[6]; bytes <= prefetchMaxBytes {
				in.pfKind, in.pf, in.pfBytes = pfRange, r.args[1], bytes
			}
		}
		out = append(out, in)
	}
	for i := 0; i+1 < len(out); i++ {
		g, d := &out[i], out[i+1]
		if strings.HasPrefix(g.name, "experts_gateup_") && strings.HasPrefix(d.name, "experts_down_") &&
			g.args[9] == d.args[9] && g.args[10] == d.args[10] && downBytes > 0 && o.prefetch {
			// the same group table and first entry: the down reads the
			// rows this gate/up reads
			g.pfKind, g.pf, g.pfN = pfGroupRows, g.args[9], int(g.args[2])
			g.pfOff, g.pfBytes = uint64(downOff), uint64(downBytes)
		}
	}
	return out, nil
}

// regrid gives an instruction whose result does not depend on its grid at
// most p units: the row kernels (matvec, grouped gate/up: warps stride over
// row tasks, and a row's dot does not depend on which warp computes it) and
// the grid-striding elementwise kernels. The grouped down's grid is its
// output rows over its tile (argument 8, rows argument 3); a larger tile,
// a multiple of the variant's rows per task, gives each row the same
// combine, so its tile grows until ceil(D/R) <= p (its shared memory, A
// activations and A x R partial sums, grows with it). Instructions with one
// unit per head (attention, q/k norm) or per chunk (argmax) keep theirs.
func regrid(in *pinstr, p int) {
	switch {
	case strings.HasPrefix(in.name, "matvec_f16_"), strings.HasPrefix(in.name, "experts_gateup_"),
		in.name == "embed_step", in.name == "rope_kv_step", in.name == "silu_mul_f32", in.name == "add_f32",
		in.name == "add_gated_resid_step":
		in.units = min(in.units, p)
	case strings.HasPrefix(in.name, "experts_down_"):
		const nr = 4 // the _r4 variants, the only down the interpreter runs
		D, R, A := int(in.args[3]), int(in.args[8]), int(in.args[2])
		if (D+R-1)/R <= p {
			return
		}
		R2 := ((D+p-1)/p + nr - 1) / nr * nr
		in.smem += 4 * A * (R2 - R)
		in.args = append([]uint64(nil), in.args...)
		in.args[8] = uint64(R2)
		in.units = (D + R2 - 1) / R2
	}
}

// encode writes the program in PInstr's layout.
func encodeInstrs(prog []pinstr) []byte {
	buf := make([]byte, pinstrBytes*len(prog))
	le := binary.LittleEndian
	for i, in := range prog {
		b := buf[i*pinstrBytes:]
		for j, v := range []int{in.op, in.units, in.dep, in.smem, in.pfKind, in.pfN, 0, 0} {
			le.PutUint32(b[4*j:], uint32(int32(v)))
		}
		le.PutUint64(b[32:], in.pf)
		le.PutUint64(b[40:], in.pfBytes)
		le.PutUint64(b[48:], in.pfOff)
		for j, a := range in.args {
			le.PutUint64(b[56+8*j:], a)
		}
	}
	return buf
}

// listProgram is a readable listing of a program, one instruction per line
// (the golden files of TestPersistentProgram show it).
func listProgram(prog []pinstr) string {
	var b strings.Builder
	for i, in := range prog {
		fmt.Fprintf(&b, "%3d %-28s units %4d  dep %3d  smem %6d", i, in.name, in.units, in.dep, in.smem)
		switch in.pfKind {
		case pfRange:
			fmt.Fprintf(&b, "  prefetch %d bytes", in.pfBytes)
		case pfGroupRows:
			fmt.Fprintf(&b, "  prefetch %d x %d bytes of the group's rows at +%d", in.pfN, in.pfBytes, in.pfOff)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// weightBytes is what an instruction reads of weights from HBM: a matvec's
// FP16 matrix (rows x cols), a grouped gate/up's or down's A expert
// matrices (gateUp, down: one expert's bytes of them); 0 for the rest,
// whose activations and KV reads are small at low depth.
func weightBytes(in pinstr, gateUp, down int64) int64 {
	switch {
	case strings.HasPrefix(in.name, "matvec_f16_"):
		return 2 * int64(in.args[5]) * int64(in.args[6])
	case strings.HasPrefix(in.name, "experts_gateup_"):
		return int64(in.args[2]) * gateUp
	case strings.HasPrefix(in.name, "experts_down_"):
		return int64(in.args[2]) * down
	}
	return 0
}

// profileTable turns one run's trace of prog (three timestamps per unit, in
// ticket order: taken, wait over, finished; ns) into a per-instruction
// time table. An instruction's exposed time is how far it moved the
// step's last finish: its last unit's finish minus the previous
// instruction's (instructions complete in program order, so these add up
// to the step). HBM time is its weight bytes at bw bytes/s. Rows are
// grouped by the plan instruction (tag without the layer) and kernel.
func profileTable(prog []pinstr, trace []uint64, gateUp, down int64, bw float64) (string, error) {
	type agg struct {
		key          string
		n            int
		exposed, run float64 // µs
		bytes        int64
	}
	var order []string
	rows := map[string]*agg{}
	t := 0
	var stepStart, prevEnd uint64
	for i, in := range prog {
		var first, last uint64
		var run float64
		for u := range in.units {
			if 3*t+2 >= len(trace) {
				return "", fmt.Errorf("trace of %d values for %d+ units", len(trace), t+1)
			}
			claim, start, end := trace[3*t], trace[3*t+1], trace[3*t+2]
			if claim == 0 || end < start || start < claim {
				return "", fmt.Errorf("instruction %d unit %d: timestamps %d %d %d", i, u, claim, start, end)
			}
			if t == 0 || claim < stepStart {
				stepStart = claim
			}
			if u == 0 || start < first {
				first = start
			}
			last = max(last, end)
			run += float64(end-start) / 1e3
			t++
		}
		if i == 0 {
			prevEnd = stepStart
		}
		exposed := float64(int64(last)-int64(prevEnd)) / 1e3
		prevEnd = max(prevEnd, last)
		op, _, _ := strings.Cut(in.tag, " L")
		key := op + " | " + in.name
		a, ok := rows[key]
		if !ok {
			a = &agg{key: key}
			rows[key] = a
			order = append(order, key)
		}
		a.n++
		a.exposed += exposed
		a.run += run / float64(in.units)
		a.bytes += weightBytes(in, gateUp, down)
	}
	total := float64(prevEnd-stepStart) / 1e3
	var b strings.Builder
	fmt.Fprintf(&b, "step: %d instructions, %.1f us from the first ticket to the last finish\n", len(prog), total)
	b.WriteString("| instruction | kernel | count | exposed (us) | share | mean unit (us) | weight MB | HBM time (us) | exposed / HBM |\n")
	b.WriteString("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	var sumBytes int64
	for _, k := range order {
		a := rows[k]
		op, kern, _ := strings.Cut(a.key, " | ")
		hbm := float64(a.bytes) / bw * 1e6
		ratio := "-"
		if hbm > 0 {
			ratio = fmt.Sprintf("%.1fx", a.exposed/hbm)
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %.1f | %.0f%% | %.2f | %.1f | %.1f | %s |\n", op, kern, a.n, a.exposed, 100*a.exposed/total,
			a.run/float64(a.n), float64(a.bytes)/1e6, hbm, ratio)
		sumBytes += a.bytes
	}
	fmt.Fprintf(&b, "weights %.1f MB: %.1f us at %.2f TB/s; the step takes %.1fx that\n", float64(sumBytes)/1e6, float64(sumBytes)/bw*1e6, bw/1e12, total/(float64(sumBytes)/bw*1e6))
	return b.String(), nil
}
