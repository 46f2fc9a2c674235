package cache

import (
	"errors"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/cpu"
)

func TestCPUDevice(t *testing.T) {
	d := NewCPUDevice(cpu.New(1))
	row, err := d.AllocRow(16)
	if err != nil {
		t.Fatal(err)
	}
	var events []Event
	var bufs []Staging
	for i := 0; i < 8; i++ { // copies run in order: the last one wins
		s, _ := d.AllocStaging(16)
		for j := range s.Host() {
			s.Host()[j] = byte(i)
		}
		ev, err := d.CopyToRow(row, s, 16)
		if err != nil {
			t.Fatal(err)
		}
		events, bufs = append(events, ev), append(bufs, s)
	}
	for _, ev := range events {
		if err := ev.Wait(); err != nil {
			t.Fatal(err)
		}
		if done, err := ev.Query(); !done || err != nil {
			t.Fatalf("Query after Wait = %v, %v", done, err)
		}
	}
	if got := rowBytes(t, row.Tensor()); got[0] != 7 || got[15] != 7 {
		t.Fatalf("row holds %v after in-order copies", got)
	}
	if _, err := d.CopyToRow(row, bufs[0], 17); err == nil {
		t.Fatal("oversized copy accepted")
	}
	ev, err := d.RecordCompute()
	if err != nil {
		t.Fatal(err)
	}
	if err := ev.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := d.FreeRow(row); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.RecordCompute(); !errors.Is(err, ErrDeviceClosed) {
		t.Fatalf("RecordCompute after Close = %v", err)
	}
	if _, err := d.CopyToRow(row, bufs[0], 1); err == nil {
		t.Fatal("copy after Close accepted")
	}
}
