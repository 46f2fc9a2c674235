package main

import "testing"

// TestCPUDefaultHint: generate's hint appears only for the CPU taken by
// default in a build with CUDA.
func TestCPUDefaultHint(t *testing.T) {
	for _, tc := range []struct {
		name      string
		set       bool
		dev       string
		cudaBuilt bool
		want      bool
	}{
		{"default cpu, CUDA build", false, "cpu", true, true},
		{"default cpu, CPU-only build", false, "cpu", false, false},
		{"--device cpu given", true, "cpu", true, false},
		{"--device cuda", true, "cuda", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := cpuDefaultHint(tc.set, tc.dev, tc.cudaBuilt) != ""; got != tc.want {
				t.Errorf("hint %v, want %v", got, tc.want)
			}
		})
	}
}
