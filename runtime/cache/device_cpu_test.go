package cache

import (
	"errors"
	"strings"
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
		ev, err := d.CopyToRow(row, s, 0, 16)
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
	// A run copies the same bytes of buffer and row, and nothing else.
	ev, err := d.CopyToRow(row, bufs[2], 5, 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := ev.Wait(); err != nil {
		t.Fatal(err)
	}
	if got := rowBytes(t, row.Tensor()); got[4] != 7 || got[5] != 2 || got[8] != 2 || got[9] != 7 {
		t.Fatalf("row holds %v after a run of bytes 5..9 from buffer 2", got)
	}
	for _, bad := range [][2]int{{0, 17}, {1, 16}, {-1, 4}, {16, 1}, {2, -1}} {
		if _, err := d.CopyToRow(row, bufs[0], bad[0], bad[1]); err == nil {
			t.Fatalf("copy of bytes %d..%d of a 16-byte buffer accepted", bad[0], bad[0]+bad[1])
		}
	}
	ev, err = d.RecordCompute()
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
	if _, err := d.CopyToRow(row, bufs[0], 0, 1); err == nil {
		t.Fatal("copy after Close accepted")
	}
}

// CopyHostToRow copies only from registered memory, on the copy stream in
// order with CopyToRow; anything else fails before enqueueing, leaving the
// row as it was.
func TestCPUDeviceRegisteredCopies(t *testing.T) {
	d := NewCPUDevice(cpu.New(1))
	defer d.Close()
	row, err := d.AllocRow(16)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 32)
	for i := range buf {
		buf[i] = byte(100 + i)
	}
	if _, err := d.CopyHostToRow(row, buf[:16], 16); !errors.Is(err, ErrNotRegistered) {
		t.Fatalf("copy before RegisterHost = %v, want ErrNotRegistered", err)
	}
	unregister, err := d.RegisterHost(buf[:24])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.RegisterHost(buf[20:]); err == nil || !strings.Contains(err.Error(), "overlaps registered") {
		t.Fatalf("overlapping RegisterHost = %v", err)
	}
	if _, err := d.RegisterHost(nil); err == nil {
		t.Fatal("empty RegisterHost accepted")
	}
	// Staged and registered copies share the copy stream: in order.
	s, _ := d.AllocStaging(16)
	ev1, err := d.CopyToRow(row, s, 0, 16)
	if err != nil {
		t.Fatal(err)
	}
	ev2, err := d.CopyHostToRow(row, buf[8:24], 16)
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(ev1.Wait(), ev2.Wait()); err != nil {
		t.Fatal(err)
	}
	if got := rowBytes(t, row.Tensor()); got[0] != 108 || got[15] != 123 {
		t.Fatalf("row holds %v, want buf[8:24]", got)
	}
	other := make([]byte, 16)
	for name, src := range map[string][]byte{
		"another buffer":               other,
		"straddling the registration":  buf[16:32],
		"after the registration's end": buf[24:32],
	} {
		_, err := d.CopyHostToRow(row, src, len(src))
		if !errors.Is(err, ErrNotRegistered) || !strings.Contains(err.Error(), "not inside registered host memory") {
			t.Errorf("copy from %s = %v, want ErrNotRegistered", name, err)
		}
	}
	if _, err := d.CopyHostToRow(row, buf[:8], 9); err == nil {
		t.Error("copy of more bytes than the source accepted")
	}
	if got := rowBytes(t, row.Tensor()); got[0] != 108 {
		t.Fatalf("a refused copy wrote the row: %v", got)
	}
	if err := unregister(); err != nil {
		t.Fatal(err)
	}
	if err := unregister(); err == nil {
		t.Fatal("second unregister succeeded")
	}
	if _, err := d.CopyHostToRow(row, buf[:16], 16); !errors.Is(err, ErrNotRegistered) {
		t.Fatalf("copy after unregister = %v, want ErrNotRegistered", err)
	}
	if d.regs.Len() != 0 {
		t.Fatalf("%d ranges left registered", d.regs.Len())
	}
	if _, err := d.RegisterHost(buf[20:]); err != nil {
		t.Fatalf("RegisterHost after unregister: %v", err)
	}
	d.Close()
	if _, err := d.CopyHostToRow(row, buf[20:], 4); !errors.Is(err, ErrDeviceClosed) {
		t.Fatalf("copy after Close = %v, want ErrDeviceClosed", err)
	}
}
