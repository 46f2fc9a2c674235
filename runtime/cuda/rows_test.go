//go:build cuda

package cuda

import (
	"math/rand/v2"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// TestRowsCopy moves an expert record through pinned staging and the copy
// stream into a row in three runs of uneven length (as the staged
// transport puts a record on the stream while the rest is still being
// staged), and checks the row computes exactly what a row written with
// WriteBytes computes. Event outcomes are stable once complete.
func TestRowsCopy(t *testing.T) {
	be := testBE
	dev := be.ExpertRows()
	l, _ := qpack.NewRecordLayout(qpack.SchemeInt4, 2048, 1024)
	rng := rand.New(rand.NewPCG(8, 9))
	rec := makeRecord(t, rng, l)

	st, err := dev.AllocStaging(l.Size)
	if err != nil {
		t.Fatal(err)
	}
	copy(st.Host(), rec)
	row, err := dev.AllocRow(l.Size)
	if err != nil {
		t.Fatal(err)
	}
	for _, run := range [][2]int{{0, l.Size / 3}, {l.Size / 3, l.Size/2 + 7}, {l.Size/2 + 7, l.Size}} {
		ev, err := dev.CopyToRow(row, st, run[0], run[1]-run[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := ev.Wait(); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if done, err := ev.Query(); !done || err != nil {
				t.Fatalf("completed copy event: Query = %v, %v", done, err)
			}
		}
	}
	x := mustF32(t, be, randF32(rng, 2048, 1))
	a, _ := be.Alloc(1024)
	b, _ := be.Alloc(1024)
	if err := be.ExpertMatVec(a, row.Tensor(), l.Gate, l.Scheme, x); err != nil {
		t.Fatal(err)
	}
	if err := be.ExpertMatVec(b, mustBytes(t, be, rec), l.Gate, l.Scheme, x); err != nil {
		t.Fatal(err)
	}
	cev, err := dev.RecordCompute()
	if err != nil {
		t.Fatal(err)
	}
	if err := cev.Wait(); err != nil {
		t.Fatal(err)
	}
	sameBits(t, "row via staging vs WriteBytes", mustRead(t, be, a), mustRead(t, be, b))

	for _, bad := range [][2]int{{0, l.Size + 1}, {1, l.Size}, {-1, 8}, {8, -1}} {
		if _, err := dev.CopyToRow(row, st, bad[0], bad[1]); err == nil {
			t.Errorf("CopyToRow of bytes %d..%d of a %d-byte buffer: no error", bad[0], bad[0]+bad[1], l.Size)
		}
	}
	if err := dev.FreeStaging(st); err != nil {
		t.Fatal(err)
	}
	if err := dev.FreeStaging(st); err == nil {
		t.Error("FreeStaging twice: no error")
	}
	if err := dev.FreeRow(row); err != nil {
		t.Fatal(err)
	}
}

// TestRowsAllocRows: rows carved from one allocation are disjoint, each
// holds the record copied into it (checked by computing on every row after
// all copies), and the slab is freed with its last row, once.
func TestRowsAllocRows(t *testing.T) {
	be := testBE
	dev := be.ExpertRows()
	l, _ := qpack.NewRecordLayout(qpack.SchemeInt4, 2048, 1024)
	rng := rand.New(rand.NewPCG(10, 11))
	const count = 5
	rows, err := dev.AllocRows(l.Size, count)
	if err != nil {
		t.Fatal(err)
	}
	recs := make([][]byte, count)
	for i, r := range rows {
		recs[i] = makeRecord(t, rng, l)
		st, err := dev.AllocStaging(l.Size)
		if err != nil {
			t.Fatal(err)
		}
		copy(st.Host(), recs[i])
		ev, err := dev.CopyToRow(r, st, 0, l.Size)
		if err != nil {
			t.Fatal(err)
		}
		if err := ev.Wait(); err != nil {
			t.Fatal(err)
		}
		if err := dev.FreeStaging(st); err != nil {
			t.Fatal(err)
		}
	}
	x := mustF32(t, be, randF32(rng, 2048, 1))
	a, _ := be.Alloc(1024)
	b, _ := be.Alloc(1024)
	for i, r := range rows {
		if err := be.ExpertMatVec(a, r.Tensor(), l.Gate, l.Scheme, x); err != nil {
			t.Fatal(err)
		}
		if err := be.ExpertMatVec(b, mustBytes(t, be, recs[i]), l.Gate, l.Scheme, x); err != nil {
			t.Fatal(err)
		}
		sameBits(t, "slab row vs WriteBytes", mustRead(t, be, a), mustRead(t, be, b))
	}
	for i, r := range rows {
		if err := dev.FreeRow(r); err != nil {
			t.Fatalf("FreeRow %d: %v", i, err)
		}
	}
	if err := dev.FreeRow(rows[0]); err == nil {
		t.Error("FreeRow twice: no error")
	}
	if _, err := dev.AllocRows(l.Size, 0); err == nil {
		t.Error("AllocRows(n, 0): no error")
	}
}
