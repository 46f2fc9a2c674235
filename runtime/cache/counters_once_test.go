package cache

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// nonTestSources returns the package's non-test Go files.
func nonTestSources(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(files, func(f string) bool { return strings.HasSuffix(f, "_test.go") })
}

// TestCountersHaveOneIncrement: every counter is changed in exactly one
// place in the package's code, so no acquisition path or step mode can
// count its own way. The group counters (hits, misses, evictions, h2d
// bytes and copies) change only in counters.go's count methods; the
// others at one site each; the device-to-host counters nowhere (their zero
// is structural).
func TestCountersHaveOneIncrement(t *testing.T) {
	re := regexp.MustCompile(`\.(\w+)\.(Add|Store|Swap|CompareAndSwap)\(`)
	sites := map[string][]string{}
	for _, f := range nonTestSources(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range re.FindAllStringSubmatch(line, -1) {
				sites[m[1]] = append(sites[m[1]], f+":"+strconv.Itoa(i+1))
			}
		}
	}
	cases := []struct {
		counter string
		sites   int
		file    string // "" for any
	}{
		{"hits", 1, "counters.go"},
		{"misses", 1, "counters.go"},
		{"evictions", 1, "counters.go"},
		{"h2dBytes", 1, "counters.go"},
		{"h2dCopies", 1, "counters.go"},
		{"stagingBytes", 1, ""},
		{"prefetchIssued", 1, ""},
		{"prefetchLoaded", 1, ""},
		{"prefetchUsed", 1, ""},
		{"prefetchH2DBytes", 1, ""},
		{"prefetchGroups", 1, ""},
		{"prefetchPredicted", 1, ""},
		{"prefetchRouted", 1, ""},
		{"prefetchOverlap", 1, ""},
		{"d2hExpertBytes", 0, ""},
		{"writebacks", 0, ""},
	}
	for _, tc := range cases {
		got := sites[tc.counter]
		if len(got) != tc.sites || tc.file != "" && !strings.HasPrefix(got[0], tc.file+":") {
			t.Errorf("counter %s is changed at %v, want %d place(s) %s", tc.counter, got, tc.sites, tc.file)
		}
	}
}

// TestCountMethodsHaveOneCaller: the count methods are called only where
// their work is done. countGroup in particular has one call site,
// (*lease).Serve: every routed group of every step mode (op by op,
// graph-full, graph-segmented with or without overlap, graph-wait) is
// counted by its lease's Serve, whether an all-hit path or a miss
// transaction served it.
func TestCountMethodsHaveOneCaller(t *testing.T) {
	callers := map[string][]string{}
	fset := token.NewFileSet()
	for _, f := range nonTestSources(t) {
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			name := funcName(fn)
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && strings.HasPrefix(sel.Sel.Name, "count") {
					callers[sel.Sel.Name] = append(callers[sel.Sel.Name], name)
				}
				return true
			})
		}
	}
	cases := []struct {
		method  string
		callers []string // sorted, one entry per call site
	}{
		{"countGroup", []string{"(*lease).Serve"}},
		{"countEvictions", []string{"(*Cache).miss", "(*Cache).prefetch"}},
		{"countCopy", []string{"(*Cache).wait"}},
	}
	known := map[string]bool{}
	for _, tc := range cases {
		known[tc.method] = true
		got := slices.Sorted(slices.Values(callers[tc.method]))
		if !slices.Equal(got, tc.callers) {
			t.Errorf("%s is called from %v, want %v", tc.method, got, tc.callers)
		}
	}
	for m, at := range callers {
		if !known[m] {
			t.Errorf("count method %s (called from %v) is not covered by this test", m, at)
		}
	}
}

// funcName names a function declaration as "(*T).M", "(T).M" or "F".
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	switch r := fn.Recv.List[0].Type.(type) {
	case *ast.StarExpr:
		if id, ok := r.X.(*ast.Ident); ok {
			return "(*" + id.Name + ")." + fn.Name.Name
		}
	case *ast.Ident:
		return "(" + r.Name + ")." + fn.Name.Name
	}
	return fn.Name.Name
}
