package plan

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fp16Reads is a decode plan's dense FP16 reads by instruction, in the
// order the CUDA stepper reads them: q|k|v, o_proj, router, the shared
// expert's gate|up|mix and down, lm_head.
func fp16Reads(p *Plan) func(i int) []int64 {
	c := p.Config
	D, Q, KV, S := int64(c.HiddenSize), int64(c.NumHeads*c.HeadDim()), int64(c.KVDim()), int64(c.SharedFFN)
	return func(i int) []int64 {
		switch p.Instrs[i].Op {
		case OpAttnIn:
			return []int64{2 * (Q + 2*KV) * D}
		case OpAttnOut:
			return []int64{2 * D * Q}
		case OpRoute:
			return []int64{2 * int64(c.NumExperts) * D}
		case OpSharedExpert:
			return []int64{2 * (2*S + 1) * D, 2 * D * S}
		case OpHead:
			return []int64{2 * int64(c.VocabSize) * D}
		}
		return nil
	}
}

// The schedules for the full shapes, as listings: a change shows up as a
// diff (go test ./runtime/plan -update).
func TestL2PrefetchesGolden(t *testing.T) {
	for _, tc := range []struct {
		arch   string
		budget int64
		file   string
	}{
		{"olmoe-1b-7b", 24 << 20, "olmoe-1b-7b-prefetch-24m.txt"},
		{"qwen15-moe-a27b", 24 << 20, "qwen15-moe-a27b-prefetch-24m.txt"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			p, err := Build(preset(t, tc.arch), Options{T: 1, MaxSeq: 4096, Head: true})
			if err != nil {
				t.Fatal(err)
			}
			got := PrefetchListing(p.Instrs, L2Prefetches(p.Instrs, fp16Reads(p), tc.budget))
			path := filepath.Join("testdata", tc.file)
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./runtime/plan -update)", err)
			}
			if got != string(want) {
				t.Fatalf("schedule differs from %s (run go test ./runtime/plan -update after checking):\n%s", path, got)
			}
		})
	}
}

// The rules, on the OLMoE tiny plan (embed, then 8 instructions a layer...
// here 6: attn-in, attention, attn-out, route, routed-experts,
// moe-residual): what each fork takes, the budget cut, and what is never
// prefetched.
func TestL2Prefetches(t *testing.T) {
	p, err := Build(preset(t, "olmoe-tiny"), Options{T: 1, MaxSeq: 64, Head: true})
	if err != nil {
		t.Fatal(err)
	}
	reads := fp16Reads(p)
	var qkv, o, router, head int64
	for i, in := range p.Instrs {
		switch r := reads(i); in.Op {
		case OpAttnIn:
			qkv = r[0]
		case OpAttnOut:
			o = r[0]
		case OpRoute:
			router = r[0]
		case OpHead:
			head = r[0]
		}
	}
	L := p.Config.NumLayers
	for _, tc := range []struct {
		name   string
		budget int64
		// per fork in plan order: the bytes each prefetched read gets
		want [][]int64
	}{
		{"everything fits", 1 << 40, func() [][]int64 {
			var w [][]int64
			for l := 0; l < L; l++ {
				w = append(w, []int64{o, router})
				if l < L-1 {
					w = append(w, []int64{qkv})
				} else {
					w = append(w, []int64{head})
				}
			}
			return w
		}()},
		{"budget cuts the second read", o + router/2, func() [][]int64 {
			var w [][]int64
			for l := 0; l < L; l++ {
				w = append(w, []int64{o, router / 2})
				if l < L-1 {
					w = append(w, []int64{min(qkv, o+router/2)})
				} else {
					w = append(w, []int64{min(head, o+router/2)})
				}
			}
			return w
		}()},
		{"no budget", 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := L2Prefetches(p.Instrs, reads, tc.budget)
			var got [][]int64
			last := -1
			for _, pf := range ps {
				if !PrefetchFork(p.Instrs[pf.At].Op) {
					t.Fatalf("prefetch at %s, not a fork", p.Instrs[pf.At].Op)
				}
				if pf.Read.Instr <= pf.At {
					t.Fatalf("instruction %d prefetches the weights of %d, which ran before it", pf.At, pf.Read.Instr)
				}
				if pf.Bytes <= 0 || pf.Bytes > pf.Read.Bytes {
					t.Fatalf("prefetch of %d bytes of a %d-byte read", pf.Bytes, pf.Read.Bytes)
				}
				if pf.At != last {
					got = append(got, nil)
					last = pf.At
				}
				got[len(got)-1] = append(got[len(got)-1], pf.Bytes)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d forks prefetch, want %d:\n%s", len(got), len(tc.want), PrefetchListing(p.Instrs, ps))
			}
			for k := range got {
				if len(got[k]) != len(tc.want[k]) {
					t.Fatalf("fork %d: %v, want %v", k, got[k], tc.want[k])
				}
				for j := range got[k] {
					if got[k][j] != tc.want[k][j] {
						t.Fatalf("fork %d: %v, want %v", k, got[k], tc.want[k])
					}
				}
			}
			if tc.budget > 0 && !strings.Contains(PrefetchListing(p.Instrs, ps), "attn-out w0") {
				t.Fatalf("listing names no attn-out read:\n%s", PrefetchListing(p.Instrs, ps))
			}
		})
	}
}
