package verifier

import (
	"testing"

	"github.com/horizon-runmap/horizon/contracts"
)

// The verifier's canonical form is written independently of package
// contracts; these tests (and FuzzCanonicalHash) hold the two to the same
// bytes on inputs chosen to hit every escaping and ordering rule.
var canonicalCases = []string{
	`{}`,
	`{"b":1,"a":[true,false,null],"c":{"z":"","y":-0.0}}`,
	`{"numbers":[1,1.0,1e3,1E+03,-0,0.000001,123456789012345678901234567890,2.5e-300]}`,
	`{"html":"<a href=\"x\">&amp;</a>","slash":"a/b\\c","quote":"\""}`,
	`{"ctl":"\u0000\u0001\b\f\n\r\t\u001f\u007f"}`,
	`{"sep":"line\u2028para\u2029end","astral":"\ud83d\ude00","bmp":"é€"}`,
	`{"é":1,"z":2,"Z":3,"\ud83d\ude00":4,"\uffff":5,"":6}`,
	`{"dup":1,"dup":2}`,
	`[{"deep":[[[{"x":[1,{"y":"z"}]}]]]}]`,
	` {"ws" :  [ 1 , 2 ] } `,
}

func TestCanonicalMatchesContracts(t *testing.T) {
	for _, in := range canonicalCases {
		compareCanonical(t, []byte(in))
	}
}

func compareCanonical(t *testing.T, in []byte) {
	t.Helper()
	tree, err := parseTree(in)
	if err != nil {
		t.Fatalf("%s: %v", in, err)
	}
	got, err := CanonicalHash(tree)
	if err != nil {
		t.Fatalf("%s: %v", in, err)
	}
	canon, err := contracts.CanonicalJSON(in)
	if err != nil {
		t.Fatalf("%s: %v", in, err)
	}
	if want := contracts.HashCanonical(canon); got != want {
		t.Errorf("%s: verifier hash %s, contracts hash %s (canonical %s)", in, got, want, canon)
	}
}

func TestContractHashOfEmbeddedContract(t *testing.T) {
	k, err := contracts.Embedded(contracts.PerfRealV1)
	if err != nil {
		t.Fatal(err)
	}
	body, err := k.JSON()
	if err != nil {
		t.Fatal(err)
	}
	want, err := k.SHA256()
	if err != nil {
		t.Fatal(err)
	}
	tree, err := parseTree(body)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := CanonicalHash(tree); err != nil || got != want {
		t.Fatalf("PERF-REAL-v1: verifier %s (%v), contracts %s", got, err, want)
	}
}
