// Package observe measures a worker from the outside of the model: the
// process's resident-set peak (from /proc), device memory over the whole
// worker (NVML, in cuda builds), and wall-clock bandwidths. Anything it
// cannot observe it reports as not observed, never as zero.
package observe

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ErrUnsupported means the platform or build cannot make an observation.
var ErrUnsupported = errors.New("observation unsupported on this platform or build")

// RSSPeakBytes returns the process's peak resident set size (VmHWM in
// /proc/self/status), which covers the whole process lifetime.
func RSSPeakBytes() (int64, error) { return procStatusBytes("/proc/self/status", "VmHWM:") }

// RSSBytes returns the current resident set size (VmRSS).
func RSSBytes() (int64, error) { return procStatusBytes("/proc/self/status", "VmRSS:") }

func procStatusBytes(path, key string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, fmt.Errorf("%s: %w", path, ErrUnsupported)
		}
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, key) {
			continue
		}
		fields := strings.Fields(strings.TrimPrefix(line, key))
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("%s: unexpected %s line %q", path, key, line)
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %s: %w", path, key, err)
		}
		return kb * 1024, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	return 0, fmt.Errorf("%s has no %s line: %w", path, key, ErrUnsupported)
}
