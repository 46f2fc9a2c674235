package worker

import (
	"bufio"
	"os"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/horizon-runmap/horizon/editions"
)

// environment describes the machine a worker runs on.
func environment(d Device) editions.Environment {
	env := editions.Environment{
		Device: d.Name, Hostname: editions.Unknown, OS: runtime.GOOS + "/" + runtime.GOARCH,
		CPU: cpuModel(), CPUs: runtime.NumCPU(), Threads: d.Threads,
		GPU: d.GPU, Driver: d.Driver, Build: editions.ReadBuildInfo(),
	}
	if h, err := os.Hostname(); err == nil {
		env.Hostname = h
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		env.OS += " " + unix.ByteSliceToString(u.Sysname[:]) + " " + unix.ByteSliceToString(u.Release[:])
	}
	if d.Name == "cpu" {
		env.GPU, env.Driver = editions.Unsupported, editions.Unsupported
	} else {
		// A Slurm task given GPUs (--gres=gpu:1) names them by their index
		// on the node: two workers on one node at once are on different
		// GPUs, which the verifier checks.
		env.GPUs = os.Getenv("SLURM_JOB_GPUS")
	}
	if env.GPU == "" {
		env.GPU = editions.Unknown
	}
	if env.Driver == "" {
		env.Driver = editions.Unknown
	}
	return env
}

// cpuModel is the first "model name" of /proc/cpuinfo, or UNKNOWN.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return editions.Unknown
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return editions.Unknown
}
