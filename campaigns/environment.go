package campaigns

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/horizon-runmap/horizon/editions"
	"github.com/horizon-runmap/horizon/runtime/model"
	"github.com/horizon-runmap/horizon/runtime/qpack"
)

// environment describes the machine a worker runs on.
func environment(d WorkerDevice) editions.Environment {
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

// synthInfo is the synthetic recipe an artifact was prepared from.
func synthInfo(art *qpack.Artifact) (model.SynthInfo, error) {
	raw := art.Meta.Identity.Source.Synthetic
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return model.SynthInfo{}, fmt.Errorf("artifact %s was not prepared from a synthetic checkpoint", art.Dir)
	}
	var info model.SynthInfo
	if err := json.Unmarshal(raw, &info); err != nil {
		return model.SynthInfo{}, fmt.Errorf("artifact %s synthetic identity: %w", art.Dir, err)
	}
	return info, nil
}
