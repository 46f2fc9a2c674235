package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
)

// workerProfileEnv names a directory: when it is set, each performance
// worker writes Go profiles of itself there (a diagnostic for the host side
// of a measurement, such as a partial-residency prefill's miss service; not
// for editions, whose workers run without it):
//
//	<config>-b<block>.cpu.pprof    CPU profile, start of the worker to its end
//	<config>-b<block>.block.pprof  blocking profile (channel, mutex and
//	                               select waits of at least ~1 µs, sampled)
//
// Read them with `go tool pprof -top carry/horizon-bench-cuda FILE`.
const workerProfileEnv = "HORIZON_WORKER_PROFILE"

// startWorkerProfiles starts the profiles workerProfileEnv asks for; stop
// writes them. With the variable unset it does nothing.
func startWorkerProfiles(config string, block int) (stop func() error, err error) {
	dir := os.Getenv(workerProfileEnv)
	if dir == "" {
		return func() error { return nil }, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("worker: %s: %w", workerProfileEnv, err)
	}
	base := filepath.Join(dir, fmt.Sprintf("%s-b%d", config, block))
	cpu, err := os.Create(base + ".cpu.pprof")
	if err != nil {
		return nil, fmt.Errorf("worker: %s: %w", workerProfileEnv, err)
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		cpu.Close()
		return nil, fmt.Errorf("worker: %s: start the CPU profile: %w", workerProfileEnv, err)
	}
	runtime.SetBlockProfileRate(1000) // ns: one sample per µs spent blocked
	fmt.Fprintf(os.Stderr, "worker: profiling into %s.{cpu,block}.pprof (%s)\n", base, workerProfileEnv)
	return func() error {
		pprof.StopCPUProfile()
		errs := []error{cpu.Close()}
		f, err := os.Create(base + ".block.pprof")
		if err == nil {
			errs = append(errs, pprof.Lookup("block").WriteTo(f, 0), f.Close())
		} else {
			errs = append(errs, err)
		}
		runtime.SetBlockProfileRate(0)
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("worker: %s: %w", workerProfileEnv, err)
		}
		return nil
	}, nil
}
