package ifeval

import "testing"

// FuzzCheckers runs every checker of the official input on arbitrary
// responses, strict and loose: none may panic.
func FuzzCheckers(f *testing.F) {
	for _, s := range []string{"", "*", "\n\n", "***", "******", "<<>>", "```json\n{}\n```", "P.S.", "[", "\"", "Section 1", "ǅ Σ İ", "\xff\xfe", "-Infinity", "{\"a\":[", "n't '"} {
		f.Add(s)
	}
	ins, err := OfficialInputs()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, resp string) {
		for i := 0; i < len(ins); i += 7 { // a spread of prompts covering every instruction id
			if _, err := Evaluate(ins[i], resp); err != nil {
				t.Fatal(err)
			}
		}
		for _, id := range InstructionIDs() {
			for _, in := range ins {
				for j, x := range in.InstructionIDList {
					if x == id {
						c, err := NewChecker(id, in.Kwargs[j])
						if err != nil {
							t.Fatal(err)
						}
						c(resp)
						goto next
					}
				}
			}
		next:
		}
	})
}
