// Command gen writes the test cases of the kernel emulator (kernels/emu):
// FP16 and int4 matvec problems with float64 references, and routed groups
// (real qpack records) with the CPU backend's scalar-v1 output as reference.
//
//	go run ./kernels/emu/gen -out DIR [-big]
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"log"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/cpu"
	"github.com/horizon-runmap/horizon/runtime/executor"
	"github.com/horizon-runmap/horizon/runtime/half"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

type w struct{ b []byte }

func (o *w) i(v int)      { o.b = binary.LittleEndian.AppendUint64(o.b, uint64(int64(v))) }
func (o *w) raw(b []byte) { o.b = append(o.b, b...) }
func (o *w) f32s(v []float32) {
	for _, x := range v {
		o.b = binary.LittleEndian.AppendUint32(o.b, math.Float32bits(x))
	}
}
func (o *w) f64s(v []float64) {
	for _, x := range v {
		o.b = binary.LittleEndian.AppendUint64(o.b, math.Float64bits(x))
	}
}
func (o *w) u16s(v []uint16) {
	for _, x := range v {
		o.b = binary.LittleEndian.AppendUint16(o.b, x)
	}
}

func randF32(rng *rand.Rand, n int, std float64) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(rng.NormFloat64() * std)
	}
	return out
}

func main() {
	out := flag.String("out", "", "output directory")
	big := flag.Bool("big", false, "also the 151936x2048 lm_head shape")
	flag.Parse()
	if *out == "" {
		log.Fatal("-out is required")
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	n := 0
	save := func(kind string, o *w) {
		n++
		p := filepath.Join(*out, fmt.Sprintf("%03d.%s", n, kind))
		if err := os.WriteFile(p, o.b, 0o644); err != nil {
			log.Fatal(err)
		}
	}
	shapes := [][2]int{{256, 256}, {512, 256}, {352, 256}, {256, 352}, {16, 256}, {3, 5}, {33, 40},
		{2048, 2048}, {1024, 2048}, {2048, 1024}, {1408, 2048}, {2048, 1408}, {50304, 2048}, {300, 4096}}
	if *big {
		shapes = append(shapes, [2]int{151936, 2048})
	}
	for _, s := range shapes {
		rows, cols := s[0], s[1]
		// FP16 matvec, with a bias every other shape.
		wv := randF32(rng, rows*cols, 0.05)
		wb := make([]uint16, len(wv))
		for i, v := range wv {
			wb[i] = half.F32ToF16(v)
		}
		x := randF32(rng, cols, 1)
		bias := n%2 == 0
		bb := make([]uint16, rows)
		for i := range bb {
			bb[i] = half.F32ToF16(float32(rng.NormFloat64() * 0.1))
		}
		ref := make([]float64, rows)
		for r := range ref {
			for c := 0; c < cols; c++ {
				ref[r] += float64(half.F16ToF32(wb[r*cols+c])) * float64(x[c])
			}
			if bias {
				ref[r] += float64(half.F16ToF32(bb[r]))
			}
		}
		o := &w{}
		o.i(rows)
		o.i(cols)
		o.i(map[bool]int{false: 0, true: 1}[bias])
		o.u16s(wb)
		o.f32s(x)
		o.u16s(bb)
		o.f64s(ref)
		save("f16mv", o)

		// int4 matvec (the gate slot of a record whose gate is [rows, cols]).
		l, err := qpack.NewRecordLayout(qpack.SchemeInt4, cols, rows)
		if err != nil {
			log.Fatal(err)
		}
		m := l.Gate
		mat := make([]byte, m.Bytes)
		if _, err := qpack.QuantizeMatrix(mat, wv, rows, cols); err != nil {
			log.Fatal(err)
		}
		deq := make([]float32, rows*cols)
		qpack.DequantizeMatrix(deq, mat, rows, cols)
		for r := range ref {
			ref[r] = 0
			for c := 0; c < cols; c++ {
				ref[r] += float64(deq[r*cols+c]) * float64(x[c])
			}
		}
		o = &w{}
		o.i(rows)
		o.i(cols)
		o.i(m.ColsPadded)
		o.i(m.ScalesOffset)
		o.i(m.Bytes)
		o.raw(mat)
		o.f32s(x)
		o.f64s(ref)
		save("w4mv", o)
	}

	groups := []struct {
		scheme      qpack.Scheme
		hidden, ffn int
		k           int
	}{
		{qpack.SchemeInt4, 256, 256, 4}, {qpack.SchemeInt4, 256, 352, 4}, {qpack.SchemeFP16, 256, 352, 4},
		{qpack.SchemeInt4, 256, 256, 8}, {qpack.SchemeInt4, 256, 256, 7}, {qpack.SchemeInt4, 256, 352, 1},
		{qpack.SchemeInt4, 2048, 1024, 8}, {qpack.SchemeInt4, 2048, 1408, 4},
		{qpack.SchemeFP16, 2048, 1024, 8}, {qpack.SchemeFP16, 2048, 1408, 4},
		{qpack.SchemeInt4, 2048, 1024, 64}, {qpack.SchemeInt4, 64, 40, 3}, {qpack.SchemeFP16, 64, 40, 3},
	}
	cb := cpu.New(1)
	for _, g := range groups {
		l, err := qpack.NewRecordLayout(g.scheme, g.hidden, g.ffn)
		if err != nil {
			log.Fatal(err)
		}
		recs := make([]byte, g.k*l.Size)
		for k := 0; k < g.k; k++ {
			rec := recs[k*l.Size : (k+1)*l.Size]
			for _, m := range l.Matrices() {
				if _, err := l.EncodeMatrix(rec, m, randF32(rng, m.Rows*m.Cols, 0.05)); err != nil {
					log.Fatal(err)
				}
			}
		}
		x := randF32(rng, g.hidden, 1)
		wts := make([]float32, g.k)
		for i := range wts {
			wts[i] = rng.Float32()
		}
		// CPU reference: scalar-v1 on the CPU backend.
		rows := make([]backend.Tensor, g.k)
		for k := range rows {
			t, _ := cb.AllocBytes(l.Size)
			if err := cb.WriteBytes(t, 0, recs[k*l.Size:(k+1)*l.Size]); err != nil {
				log.Fatal(err)
			}
			rows[k] = t
		}
		xt, _ := cb.Alloc(g.hidden)
		if err := cb.WriteF32(xt, x); err != nil {
			log.Fatal(err)
		}
		ot, _ := cb.Alloc(g.hidden)
		ex, err := executor.New("scalar-v1", cb, l, g.k)
		if err != nil {
			log.Fatal(err)
		}
		if err := ex.Forward(ot, xt, rows, wts); err != nil {
			log.Fatal(err)
		}
		ref := make([]float32, g.hidden)
		if err := cb.ReadF32(ot, ref); err != nil {
			log.Fatal(err)
		}
		o := &w{}
		o.i(map[qpack.Scheme]int{qpack.SchemeInt4: 0, qpack.SchemeFP16: 1}[g.scheme])
		o.i(g.hidden)
		o.i(g.ffn)
		o.i(g.k)
		for _, m := range l.Matrices() {
			o.i(m.Offset)
			o.i(m.ColsPadded)
			o.i(m.ScalesOffset)
		}
		o.i(l.Size)
		o.raw(recs)
		o.f32s(x)
		o.f32s(wts)
		o.f32s(ref)
		save("group", o)
	}
	fmt.Printf("gen: %d cases in %s\n", n, *out)
}
