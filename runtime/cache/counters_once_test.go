package cache

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestCountersHaveOneIncrement: each group counter (hits, misses,
// evictions, h2d bytes and copies) is incremented in exactly one place in
// the package's code (counters.go's count methods), so no acquisition path
// or step mode can count a group its own way.
func TestCountersHaveOneIncrement(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	sites := map[string][]string{}
	re := regexp.MustCompile(`\.(hits|misses|evictions|h2dBytes|h2dCopies)\.(Add|Store|Swap|CompareAndSwap)\(`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
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
	for _, c := range []string{"hits", "misses", "evictions", "h2dBytes", "h2dCopies"} {
		if len(sites[c]) != 1 || !strings.HasPrefix(sites[c][0], "counters.go:") {
			t.Errorf("counter %s is changed at %v, want exactly one place, in counters.go", c, sites[c])
		}
	}
}
