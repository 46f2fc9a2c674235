package cuda

import (
	"encoding/binary"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestPersistentOpcodes: persistentOps is kernels/persistent.cu's enum
// PersistentOp, name for name and in order (the opcodes are the indices).
func TestPersistentOpcodes(t *testing.T) {
	src, err := os.ReadFile("../../kernels/persistent.cu")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)enum PersistentOp \{(.*?)\};`).FindSubmatch(src)
	if m == nil {
		t.Fatal("persistent.cu: no enum PersistentOp")
	}
	var got []string
	for _, f := range strings.Split(string(m[1]), ",") {
		f = strings.TrimSpace(f)
		if f == "" || f == "PK_COUNT" {
			continue
		}
		got = append(got, strings.TrimPrefix(f, "PK_"))
	}
	if !slices.Equal(got, persistentOps) {
		t.Fatalf("persistent.cu opcodes %v\npersistentOps   %v", got, persistentOps)
	}
	if n := regexp.MustCompile(`#define PI_ARGS (\d+)`).FindSubmatch(src); n == nil || string(n[1]) != "25" || pinstrArgs != 25 {
		t.Fatalf("PI_ARGS %q, pinstrArgs %d", n, pinstrArgs)
	}
}

func matvecRec(w uint64, rows, cols int) launchRec {
	return launchRec{name: "matvec_f16_r4_s", grid: 264, block: 256, smem: 9216,
		args: []uint64{1, w, 3, 0, 0, uint64(rows), uint64(cols), 0, 0, 0}}
}

func TestEncodeProgram(t *testing.T) {
	gate := launchRec{name: "experts_gateup_int4_p2_s_t", grid: 264, block: 256, smem: 9000,
		args: []uint64{10, 11, 8, 1024, 2048, 0, 1 << 20, 2048, 1 << 19, 0xAB00, 0, 0, 0, 0}}
	down := launchRec{name: "experts_down_int4_r4_s_t", grid: 128, block: 256, smem: 40000,
		args: []uint64{12, 10, 8, 2048, 1024, 2 << 20, 1024, 1 << 20, 16, 0xAB00, 0, 12, 0}}
	route := launchRec{name: "route_step", grid: 1, block: 32, args: make([]uint64, 12)}
	argmax := launchRec{name: "argmax_step", grid: 25, block: 1024, args: make([]uint64, 9)}
	for _, tc := range []struct {
		name string
		recs []launchRec
		want string // listProgram, or the error
	}{
		{"chain and prefetch", []launchRec{matvecRec(0x1000, 6144, 2048), route, gate, down, matvecRec(0x2000, 50304, 2048), argmax},
			"  0 matvec_f16_r4_s              units  264  dep  -1  smem   9216  prefetch 25165824 bytes\n" +
				"  1 route_step                   units    1  dep   0  smem      0\n" +
				"  2 experts_gateup_int4_p2_s_t   units  264  dep   1  smem   9000  prefetch 8 x 4096 bytes of the group's rows at +2048\n" +
				"  3 experts_down_int4_r4_s_t     units  128  dep   2  smem  40000\n" +
				"  4 matvec_f16_r4_s              units  264  dep   3  smem   9216\n" +
				"  5 argmax_step                  units   25  dep   4  smem      0\n"},
		{"gate/up over another table", []launchRec{gate, func() launchRec { d := down; d.args = slices.Clone(d.args); d.args[9] = 0xCD00; return d }()},
			"  0 experts_gateup_int4_p2_s_t   units  264  dep  -1  smem   9000\n" +
				"  1 experts_down_int4_r4_s_t     units  128  dep   0  smem  40000\n"},
		{"unknown kernel", []launchRec{{name: "matvec_f16_r1_g", grid: 1, block: 256}}, "launch 0: kernel matvec_f16_r1_g has no body in the persistent kernel"},
		{"another variant", []launchRec{{name: "experts_down_int4_r8_s_t", grid: 1, block: 256}}, "launch 0: kernel experts_down_int4_r8_s_t has no body in the persistent kernel"},
		{"block size", []launchRec{{name: "add_f32", grid: 4, block: 128, args: make([]uint64, 4)}}, "launch 0 (add_f32): block of 128 threads; the persistent kernel runs blocks of 256"},
		{"too many arguments", []launchRec{{name: "add_f32", grid: 4, block: 256, args: make([]uint64, 26)}}, "launch 0 (add_f32): 26 arguments, an instruction holds 25"},
		{"empty grid", []launchRec{{name: "add_f32", grid: 0, block: 256, args: make([]uint64, 4)}}, "launch 0 (add_f32): grid of 0 blocks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prog, err := encodeProgram(tc.recs, programOptions{downOff: 2048, downBytes: 4096, prefetch: true})
			got := ""
			if err != nil {
				got = err.Error()
			} else {
				got = listProgram(prog)
			}
			if tc.want == "" && err == nil {
				t.Fatalf("accepted: %s", got)
			}
			if tc.want != "" && got != tc.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// TestRegrid: row and elementwise instructions take at most the persistent
// grid; the down's tile grows (a multiple of its rows per task) until its
// grid fits, its shared memory with it; per-head instructions keep theirs.
func TestRegrid(t *testing.T) {
	down := launchRec{name: "experts_down_int4_r4_s_t", grid: 256, block: 256, smem: 40000,
		args: []uint64{12, 10, 8, 2048, 1024, 0, 1024, 0, 8, 0xAB00, 0, 12, 0}}
	att := launchRec{name: "attention_step", grid: 256, block: 256, args: make([]uint64, 10)}
	add := launchRec{name: "add_f32", grid: 1056, block: 256, args: make([]uint64, 4)}
	prog, err := encodeProgram([]launchRec{matvecRec(1, 6144, 2048), down, att, add}, programOptions{blocks: 132})
	if err != nil {
		t.Fatal(err)
	}
	want := "  0 matvec_f16_r4_s              units  132  dep  -1  smem   9216\n" +
		"  1 experts_down_int4_r4_s_t     units  128  dep   0  smem  40256\n" +
		"  2 attention_step               units  256  dep   1  smem      0\n" +
		"  3 add_f32                      units  132  dep   2  smem      0\n"
	if got := listProgram(prog); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if prog[1].args[8] != 16 || down.args[8] != 8 {
		t.Fatalf("down tile %d (recorded %d), want 16 (8)", prog[1].args[8], down.args[8])
	}
}

// TestEncodeInstrs: the byte layout is PInstr's (persistent.cu): four
// ints, pf_kind and pf_n, two pad ints, pf, pf_bytes, pf_off, then the
// argument slots from byte 56.
func TestEncodeInstrs(t *testing.T) {
	prog := []pinstr{{op: 11, units: 264, dep: -1, smem: 9216, pfKind: pfGroupRows, pfN: 8, pf: 0xAB00, pfBytes: 4096, pfOff: 2048,
		args: []uint64{1, 2, 3}}, {op: 5, units: 1, dep: 0, args: []uint64{7}}}
	b := encodeInstrs(prog)
	if len(b) != 2*pinstrBytes {
		t.Fatalf("%d bytes", len(b))
	}
	le := binary.LittleEndian
	for _, c := range []struct {
		off  int
		want uint64
		size int
	}{
		{0, 11, 4}, {4, 264, 4}, {8, 0xFFFFFFFF, 4}, {12, 9216, 4}, {16, pfGroupRows, 4}, {20, 8, 4},
		{32, 0xAB00, 8}, {40, 4096, 8}, {48, 2048, 8}, {56, 1, 8}, {64, 2, 8}, {72, 3, 8}, {80, 0, 8},
		{pinstrBytes, 5, 4}, {pinstrBytes + 8, 0, 4}, {pinstrBytes + 56, 7, 8},
	} {
		var got uint64
		if c.size == 4 {
			got = uint64(le.Uint32(b[c.off:]))
		} else {
			got = le.Uint64(b[c.off:])
		}
		if got != c.want {
			t.Errorf("byte %d: %#x, want %#x", c.off, got, c.want)
		}
	}
	if 56+8*pinstrArgs != pinstrBytes {
		t.Fatalf("%d argument slots from byte 56 do not fill %d bytes", pinstrArgs, pinstrBytes)
	}
}

// TestProfileTable: exposed times add up to the step, HBM time is the
// weight bytes at the bandwidth, rows group by plan instruction and kernel.
func TestProfileTable(t *testing.T) {
	mv := matvecRec(0x1000, 1000, 1000) // 2 MB of weights
	mv.grid, mv.tag = 2, "attn-in L0"
	mv2 := mv
	mv2.tag = "attn-in L1"
	add := launchRec{name: "add_f32", grid: 1, block: 256, args: make([]uint64, 4), tag: "moe-residual L0"}
	prog, err := encodeProgram([]launchRec{mv, add, mv2}, programOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// ns: matvec units 1000-3000 and 1500-4000; add 4100-5000; matvec 5000-7000, 5200-6000
	trace := []uint64{1000, 1000, 3000, 1100, 1500, 4000, 3100, 4100, 5000, 4500, 5000, 7000, 4600, 5200, 6000}
	got, err := profileTable(prog, trace, 0, 0, 1e12)
	if err != nil {
		t.Fatal(err)
	}
	want := "step: 3 instructions, 6.0 us from the first ticket to the last finish\n" +
		"| instruction | kernel | count | exposed (us) | share | mean unit (us) | weight MB | HBM time (us) | exposed / HBM |\n" +
		"| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n" +
		"| attn-in | matvec_f16_r4_s | 2 | 5.0 | 83% | 1.82 | 4.0 | 4.0 | 1.2x |\n" +
		"| moe-residual | add_f32 | 1 | 1.0 | 17% | 0.90 | 0.0 | 0.0 | - |\n" +
		"weights 4.0 MB: 4.0 us at 1.00 TB/s; the step takes 1.5x that\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if _, err := profileTable(prog, trace[:9], 0, 0, 1e12); err == nil {
		t.Fatal("a short trace was accepted")
	}
}
