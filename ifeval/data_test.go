package ifeval

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
)

func TestDataSHA256(t *testing.T) {
	for _, tc := range []struct{ path, sha string }{
		{"data/input_data.jsonl", OfficialInputSHA256},
		{"testdata/input_response_data_gpt4_20231107_145030.jsonl", "0cff1d1469b774e80296bee20ca696894df35f3c6d6539f2c886d67c07599dcb"},
		{"testdata/eval_results_strict.jsonl", "591d056cae9270c4de5b17ffee4f62624bd203f86d9622664b6e315bec65be6f"},
		{"testdata/eval_results_loose.jsonl", "5e5843e2233d8e0741c8ddc964b8f751cafc26fa0ec2c99194ea837ee7a75d39"},
	} {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			b, err := os.ReadFile(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(b)
			if got := hex.EncodeToString(sum[:]); got != tc.sha {
				t.Errorf("sha256 %s, want %s", got, tc.sha)
			}
		})
	}
	sum := sha256.Sum256(OfficialInputBytes())
	if got := hex.EncodeToString(sum[:]); got != OfficialInputSHA256 {
		t.Errorf("embedded input sha256 %s", got)
	}
}

func TestOfficialInputs(t *testing.T) {
	ins, err := OfficialInputs()
	if err != nil {
		t.Fatal(err)
	}
	n, ids := 0, map[string]bool{}
	for _, in := range ins {
		n += len(in.InstructionIDList)
		for _, id := range in.InstructionIDList {
			ids[id] = true
		}
		if _, err := Checkers(in); err != nil {
			t.Errorf("key %d: %v", in.Key, err)
		}
	}
	if len(ins) != 541 || n != 834 || len(ids) != 25 || len(InstructionIDs()) != 25 {
		t.Errorf("%d prompts, %d instructions, %d ids used, %d registered; want 541, 834, 25, 25", len(ins), n, len(ids), len(InstructionIDs()))
	}
}
