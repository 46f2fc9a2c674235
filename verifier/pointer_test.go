package verifier

import (
	"encoding/json"
	"testing"
)

func TestResolve(t *testing.T) {
	// RFC 6901 section 5's example document.
	doc, err := parseTree([]byte(`{"foo":["bar","baz"],"":0,"a/b":1,"c%d":2,"e^f":3,"g|h":4,"i\\j":5,"k\"l":6," ":7,"m~n":8}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		p    string
		want any
	}{
		{"/foo/0", "bar"}, {"/", json.Number("0")}, {"/a~1b", json.Number("1")}, {"/c%d", json.Number("2")},
		{"/e^f", json.Number("3")}, {"/g|h", json.Number("4")}, {"/i\\j", json.Number("5")}, {"/k\"l", json.Number("6")},
		{"/ ", json.Number("7")}, {"/m~0n", json.Number("8")},
	} {
		got, err := resolve(doc, tc.p)
		if err != nil || got != tc.want {
			t.Errorf("resolve(%q) = %v, %v; want %v", tc.p, got, err, tc.want)
		}
	}
	for _, bad := range []string{"foo", "/foo/2", "/foo/-", "/foo/01", "/foo/-1", "/nope", "/m~2n", "/foo/0/x", "/foo/1e0"} {
		if _, err := resolve(doc, bad); err == nil {
			t.Errorf("resolve(%q) succeeded", bad)
		}
	}
	if got := ptr("a/b", 3, "m~n"); got != "/a~1b/3/m~0n" {
		t.Errorf("ptr = %q", got)
	}
}
