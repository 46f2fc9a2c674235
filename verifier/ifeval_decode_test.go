package verifier

import (
	"math/rand/v2"
	"testing"

	"github.com/horizon-runmap/horizon/runtime/tokenizer"
)

// TestByteLevelText: the verifier's own byte-level decoder gives the
// runtime tokenizer's text on random id sequences (valid and ill-formed
// UTF-8, EOS ids, other specials) and on hand-picked ill-formed cases.
func TestByteLevelText(t *testing.T) {
	eos := []int{257, 300}
	tok := tokenizer.NewByteLevel(512, eos)
	cases := [][]int{
		{0xE2, 0x82, 'A'}, {0xF0, 0x9F, 0x98}, {0xED, 0xA0, 0x80}, {0xC0, 0xAF}, {0xF4, 0x90, 0x80, 0x80},
		{0xE0, 0x80, 0x80}, {'h', 'i', 257}, {258, 'x', 300}, {0xFF, 0xFE}, {0xE2, 0x82, 0xAC},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		ids := make([]int, r.IntN(24))
		for i := range ids {
			switch r.IntN(10) {
			case 0:
				ids[i] = 256 + r.IntN(60) // specials, EOS among them
			case 1, 2, 3:
				ids[i] = 0x80 + r.IntN(0x80) // high bytes
			default:
				ids[i] = r.IntN(256)
			}
		}
		cases = append(cases, ids)
	}
	for _, ids := range cases {
		if got, want := byteLevelText(ids, eos), tok.Decode(ids); got != want {
			t.Fatalf("ids %v: verifier %q, tokenizer %q", ids, got, want)
		}
	}
}
