//go:build cuda

package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"gorgonia.org/cu"

	"github.com/horizon-runmap/horizon/runtime/backend"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// TestRouteGroupsTable: RouteRows' device routing (the top-k, then
// tc_route_groups) against a reference built on the host from the ids it
// reads back: the pairs packed by expert in id order, each expert's slots
// increasing (tok = slot / k, iden = p), and the gate, up and down tables
// holding an entry per tile pairs of each expert (its record base plus the
// matrix's offset; tile 64, or 16 where the small-entry kernel takes the
// routing), then entries of count 0 up to floor(P / tile) + min(E, P).
// Shapes: few tokens (most experts unrouted), a 64-pair tile crossed, and
// 512 tokens of OLMoE's 64 experts, top-8.
func TestRouteGroupsTable(t *testing.T) {
	be := testBE
	rng := rand.New(rand.NewPCG(5, 9))
	lay, err := qpack.NewRecordLayout(qpack.SchemeInt4, 256, 128)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ T, k, E int }{{3, 2, 8}, {37, 8, 64}, {512, 8, 64}, {57, 4, 60}} {
		t.Run(fmt.Sprintf("T%d/k%d/E%d", c.T, c.k, c.E), func(t *testing.T) {
			rows := expertRows(t, be, c.E, lay.Size)
			logits := make([]float32, c.T*c.E)
			for i := range logits {
				logits[i] = float32(rng.NormFloat64())
			}
			r, err := be.RouteRows(mustF32(t, be, logits), c.T, c.k, rows, lay)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Release()
			ids, err := r.IDs()
			if err != nil {
				t.Fatal(err)
			}
			wantIDs, _, err := be.TopKRows(mustF32(t, be, logits), c.T, c.k, false)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(ids, wantIDs) {
				t.Fatalf("ids %v, TopKRows %v", ids, wantIDs)
			}
			rt := r.(*routing)
			P, maxE := c.T*c.k, rt.maxE
			// The entries hold tcTile pairs, or tcFD16Tile where the
			// small-entry kernel takes the routing (tcGroupedFD16).
			tile := tcTile
			if be.tcGroupedFD16(0, P, c.E) {
				tile = tcFD16Tile
			}
			if rt.tile != tile {
				t.Fatalf("tables of %d pairs an entry, want %d", rt.tile, tile)
			}
			read := func(p uint64, n int) []byte {
				var out []byte
				if err := be.o.do(func() error {
					b, err := be.read(cu.DevicePtr(p), n)
					out = append([]byte(nil), b...)
					return err
				}); err != nil {
					t.Fatal(err)
				}
				return out
			}
			i32 := func(b []byte) []int {
				out := make([]int, len(b)/4)
				for i := range out {
					out[i] = int(int32(binary.LittleEndian.Uint32(b[4*i:])))
				}
				return out
			}
			tok, slot, iden := i32(read(uint64(rt.tok), 4*P)), i32(read(uint64(rt.slot), 4*P)), i32(read(uint64(rt.iden), 4*P))
			tab := read(uint64(rt.tab), 3*maxE*tcGroupBytes)
			var wantTok, wantSlot, wantIden []int
			type entry struct {
				mat          uint64
				pair0, count int
			}
			wantTab := make([][]entry, 3)
			for e := range c.E {
				base := len(wantSlot)
				for s, id := range ids {
					if id == e {
						wantTok, wantSlot = append(wantTok, s/c.k), append(wantSlot, s)
					}
				}
				n := len(wantSlot) - base
				for p0 := 0; p0 < n; p0 += tile {
					for w, m := range lay.Matrices() {
						wantTab[w] = append(wantTab[w], entry{uint64(rows[e].(*Tensor).ptr) + uint64(m.Offset), base + p0, min(tile, n-p0)})
					}
				}
			}
			for p := range P {
				wantIden = append(wantIden, p)
			}
			if !reflect.DeepEqual(tok, wantTok) || !reflect.DeepEqual(slot, wantSlot) || !reflect.DeepEqual(iden, wantIden) {
				t.Fatalf("pairs:\ntok  %v\nwant %v\nslot %v\nwant %v", tok, wantTok, slot, wantSlot)
			}
			if maxE != P/tile+min(c.E, P) {
				t.Fatalf("%d table entries, want floor(P/%d) + min(E, P) = %d", maxE, tile, P/tile+min(c.E, P))
			}
			for w := range 3 {
				for n := range maxE {
					b := tab[(w*maxE+n)*tcGroupBytes:]
					got := entry{binary.LittleEndian.Uint64(b), int(int32(binary.LittleEndian.Uint32(b[8:]))), int(int32(binary.LittleEndian.Uint32(b[12:])))}
					want := entry{}
					if n < len(wantTab[w]) {
						want = wantTab[w][n]
					}
					if got != want {
						t.Fatalf("table %d entry %d: %+v, want %+v", w, n, got, want)
					}
				}
			}
		})
	}
}

// TestRoutePublished: RouteRows' ids reach the host through mapped memory
// (tc_route_groups writes them, then the buffers' sequence number), for
// routings read in launch order while later ones are in flight, and for
// buffers reused after a Release (the number goes up, so a reused buffer's
// old ids are never taken for the new routing's). Routings over the same
// rows share one device copy of the record bases (routeBasesOf), uploaded
// once.
func TestRoutePublished(t *testing.T) {
	be := testBE
	rng := rand.New(rand.NewPCG(7, 11))
	lay, err := qpack.NewRecordLayout(qpack.SchemeInt4, 256, 128)
	if err != nil {
		t.Fatal(err)
	}
	const T, k, E = 19, 4, 16
	rows := expertRows(t, be, E, lay.Size)
	var bases cu.DevicePtr
	for round := range 3 {
		// Three routings in flight, read in launch order.
		var rs []backend.Routing
		var want [][]int
		for range 3 {
			logits := make([]float32, T*E)
			for i := range logits {
				logits[i] = float32(rng.NormFloat64())
			}
			r, err := be.RouteRows(mustF32(t, be, logits), T, k, rows, lay)
			if err != nil {
				t.Fatal(err)
			}
			rs = append(rs, r)
			w, _, err := be.TopKRows(mustF32(t, be, logits), T, k, false)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, w)
		}
		for i, r := range rs {
			ids, err := r.IDs()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(ids, want[i]) {
				t.Fatalf("round %d routing %d: ids %v, TopKRows %v", round, i, ids, want[i])
			}
			rt := r.(*routing)
			if round > 0 && rt.seq < 2 {
				t.Fatalf("round %d routing %d: sequence number %d on reused buffers", round, i, rt.seq)
			}
			if bases == 0 {
				bases = rt.bases
			} else if rt.bases != bases {
				t.Fatalf("round %d routing %d: record bases at %#x, the first routing's at %#x", round, i, rt.bases, bases)
			}
			r.Release()
		}
	}
}

// expertRows allocates n expert rows of size bytes each, freed when the
// test ends.
func expertRows(t *testing.T, be *Backend, n, size int) []backend.Tensor {
	t.Helper()
	rows := make([]backend.Tensor, n)
	for e := range rows {
		var err error
		if rows[e], err = be.AllocBytes(size); err != nil {
			t.Fatal(err)
		}
		row := rows[e]
		t.Cleanup(func() {
			if err := be.Free(row); err != nil {
				t.Error(err)
			}
		})
	}
	return rows
}

// TestTopKRowsWarp: router_topk_rows_warp (a warp a row, the default where
// topKRowsWarp picks it) gives router_topk_rows' ids and weights bit for
// bit (tuning.noTopKWarp), on normal logits, on rows with tied logits (the
// lower index wins) and -inf logits, for OLMoE's and Qwen1.5-MoE's routers,
// a few experts, 256 experts top-64 and row counts off the 8 rows a block.
func TestTopKRowsWarp(t *testing.T) {
	be := testBE
	rng := rand.New(rand.NewPCG(3, 17))
	for _, c := range []struct {
		T, E, k int
		ties    bool
	}{{64, 64, 8, false}, {19, 64, 8, true}, {57, 60, 4, true}, {3, 8, 2, false}, {9, 256, 64, true}, {512, 64, 8, true}} {
		t.Run(fmt.Sprintf("T%d/E%d/k%d/ties%v", c.T, c.E, c.k, c.ties), func(t *testing.T) {
			if !be.topKRowsWarp(c.E, c.k) {
				t.Fatalf("topKRowsWarp(%d, %d) is false by default", c.E, c.k)
			}
			logits := make([]float32, c.T*c.E)
			for i := range logits {
				logits[i] = float32(2 * rng.NormFloat64())
			}
			if c.ties {
				for r := range c.T {
					l := logits[r*c.E : (r+1)*c.E]
					for i := 1; i < c.E; i += 3 {
						l[i] = l[i-1]
					}
					l[c.E-1] = float32(math.Inf(-1))
				}
			}
			run := func(tn tuning) ([]int, []float32) {
				withTuning(t, be, tn)
				ids, w, err := be.TopKRows(mustF32(t, be, logits), c.T, c.k, false)
				if err != nil {
					t.Fatal(err)
				}
				return ids, w
			}
			wantIDs, wantW := run(tuning{noTopKWarp: true})
			ids, w := run(tuning{})
			if !reflect.DeepEqual(ids, wantIDs) {
				t.Fatalf("ids differ from router_topk_rows':\n%v\n%v", ids[:min(len(ids), 16)], wantIDs[:min(len(ids), 16)])
			}
			for i := range w {
				if math.Float32bits(w[i]) != math.Float32bits(wantW[i]) {
					t.Fatalf("weight %d: %g, router_topk_rows %g", i, w[i], wantW[i])
				}
			}
		})
	}
}
