package observe

import (
	"errors"
	"math"
	"reflect"
	"sync"
	"testing"
	"time"
)

func TestSummarizeVRAM(t *testing.T) {
	for _, tc := range []struct {
		name              string
		samples           []VRAMSample
		devPeak, procPeak int64
	}{
		{"empty", nil, 0, -1},
		{"process never listed", []VRAMSample{{0, 500, -1}, {1, 700, -1}}, 700, -1},
		{"peaks at different times", []VRAMSample{{0, 100, 10}, {1, 900, 40}, {2, 300, 80}, {3, 200, 20}}, 900, 80},
		{"process listed only sometimes", []VRAMSample{{0, 100, -1}, {1, 200, 60}, {2, 150, -1}}, 200, 60},
		{"process observed at zero bytes", []VRAMSample{{0, 518, 0}}, 518, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := SummarizeVRAM(tc.samples)
			if r.DevicePeak != tc.devPeak || r.ProcessPeak != tc.procPeak {
				t.Fatalf("peaks device %d process %d, want %d %d", r.DevicePeak, r.ProcessPeak, tc.devPeak, tc.procPeak)
			}
			if !reflect.DeepEqual(r.Samples, tc.samples) {
				t.Fatalf("timeline %v, want %v", r.Samples, tc.samples)
			}
		})
	}
}

func TestProcessBytes(t *testing.T) {
	const me = 4242
	for _, tc := range []struct {
		name  string
		procs []procMem
		want  int64
	}{
		{"empty list", nil, -1},
		{"other processes only", []procMem{{1, 100}, {4243, 200}}, -1},
		{"listed", []procMem{{1, 100}, {me, 300 << 20}}, 300 << 20},
		{"listed at zero", []procMem{{me, 0}}, 0},
		{"one entry per instance", []procMem{{me, 100}, {7, 5}, {me, 50}}, 150},
		{"usage withheld", []procMem{{me, math.MaxUint64}}, -1},
		{"usage withheld for one instance", []procMem{{me, 100}, {me, math.MaxUint64}}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := processBytes(tc.procs, me); got != tc.want {
				t.Fatalf("processBytes = %d, want %d", got, tc.want)
			}
		})
	}
}

// script is a fake vramReader: it returns its readings in order, then
// repeats the last one.
type script struct {
	mu       sync.Mutex
	readings []reading
	calls    int
	released int
}

type reading struct {
	dev, proc int64
	err       error
}

func (s *script) read() (int64, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.readings[min(s.calls, len(s.readings)-1)]
	s.calls++
	return r.dev, r.proc, r.err
}

func (s *script) release() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.released++
	return nil
}

func TestPollSamplerStartAndStop(t *testing.T) {
	errRead := errors.New("fake NVML failure")
	for _, tc := range []struct {
		name     string
		readings []reading
		want     []VRAMSample // AtNs not compared
		devPeak  int64
		procPeak int64
		wantErr  bool
	}{
		{"both observed", []reading{{100, 40, nil}, {250, 90, nil}},
			[]VRAMSample{{0, 100, 40}, {0, 250, 90}}, 250, 90, false},
		{"process not listed: unknown, not zero", []reading{{100, -1, nil}, {300, -1, nil}},
			[]VRAMSample{{0, 100, -1}, {0, 300, -1}}, 300, -1, false},
		{"failed reading left out", []reading{{0, 0, errRead}, {300, 20, nil}},
			[]VRAMSample{{0, 300, 20}}, 300, 20, false},
		{"every reading failed", []reading{{0, 0, errRead}}, nil, 0, -1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := &script{readings: tc.readings}
			// An interval far beyond the test: exactly one sample at start
			// and one at Stop.
			s, err := startPolling(sc.read, time.Hour, sc.release)
			if err != nil {
				t.Fatal(err)
			}
			r, err := s.Stop()
			if tc.wantErr {
				if err == nil || !errors.Is(err, errRead) {
					t.Fatalf("Stop error %v, want one wrapping %v", err, errRead)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if sc.calls != 2 || sc.released != 1 {
				t.Fatalf("%d readings and %d releases, want 2 and 1", sc.calls, sc.released)
			}
			got := make([]VRAMSample, len(r.Samples))
			for i, smp := range r.Samples {
				got[i] = VRAMSample{DeviceUsed: smp.DeviceUsed, ProcessUsed: smp.ProcessUsed}
			}
			if len(got) == 0 {
				got = nil
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("timeline %v, want %v", got, tc.want)
			}
			if r.DevicePeak != tc.devPeak || r.ProcessPeak != tc.procPeak {
				t.Fatalf("peaks device %d process %d, want %d %d", r.DevicePeak, r.ProcessPeak, tc.devPeak, tc.procPeak)
			}
			// A second Stop returns the same result and releases nothing more.
			r2, err2 := s.Stop()
			if !reflect.DeepEqual(r, r2) || (err == nil) != (err2 == nil) || sc.released != 1 {
				t.Fatalf("second Stop: %v %v (released %d), want %v %v", r2, err2, sc.released, r, err)
			}
		})
	}
}

func TestPollSamplerTimeline(t *testing.T) {
	// Device memory rises then falls; the process appears after a while.
	var readings []reading
	for i := int64(0); i < 20; i++ {
		proc := int64(-1)
		if i >= 5 {
			proc = i * 10
		}
		readings = append(readings, reading{dev: 1000 - (i-10)*(i-10), proc: proc})
	}
	sc := &script{readings: readings}
	s, err := startPolling(sc.read, time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		sc.mu.Lock()
		n := sc.calls
		sc.mu.Unlock()
		if n >= len(readings) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d readings in 10 s at a 1 ms interval", n)
		}
		time.Sleep(time.Millisecond)
	}
	r, err := s.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Samples) < len(readings) {
		t.Fatalf("%d samples, want at least %d", len(r.Samples), len(readings))
	}
	for i := 1; i < len(r.Samples); i++ {
		if r.Samples[i].AtNs < r.Samples[i-1].AtNs {
			t.Fatalf("sample %d at %d ns, before sample %d at %d ns", i, r.Samples[i].AtNs, i-1, r.Samples[i-1].AtNs)
		}
	}
	if r.DevicePeak != 1000 || r.ProcessPeak != 190 {
		t.Fatalf("peaks device %d process %d, want 1000 and 190", r.DevicePeak, r.ProcessPeak)
	}
	if want := SummarizeVRAM(r.Samples); want.DevicePeak != r.DevicePeak || want.ProcessPeak != r.ProcessPeak {
		t.Fatalf("sampler peaks %d/%d differ from its timeline's %d/%d", r.DevicePeak, r.ProcessPeak, want.DevicePeak, want.ProcessPeak)
	}
}

func TestPollSamplerInterval(t *testing.T) {
	sc := &script{readings: []reading{{1, 1, nil}}}
	if _, err := startPolling(sc.read, 0, nil); err == nil {
		t.Fatal("zero interval accepted")
	}
	if sc.calls != 0 {
		t.Fatalf("%d readings for a rejected sampler", sc.calls)
	}
}
