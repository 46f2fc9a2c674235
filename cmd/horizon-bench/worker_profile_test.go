package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWorkerProfiles: with HORIZON_WORKER_PROFILE unset nothing is written;
// set, both profiles are written, non-empty, under the configuration's and
// block's name; an unusable directory is an error before any work.
func TestWorkerProfiles(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, env string
		files     []string
		wantErr   bool
	}{
		{"unset", "", nil, false},
		{"set", filepath.Join(dir, "prof"), []string{"c30-b2.cpu.pprof", "c30-b2.block.pprof"}, false},
		{"not a directory", filepath.Join(blocker, "sub"), nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(workerProfileEnv, tc.env)
			stop, err := startWorkerProfiles("c30", 2)
			if tc.wantErr {
				if err == nil {
					stop()
					t.Fatal("no error for an unusable profile directory")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			for _, f := range tc.files {
				st, err := os.Stat(filepath.Join(tc.env, f))
				if err != nil || st.Size() == 0 {
					t.Errorf("%s: %v (size %v)", f, err, st)
				}
			}
		})
	}
}
