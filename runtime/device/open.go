package device

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/horizon-runmap/horizon/runtime/backend"
)

// Opening devices by name. A device backend registers an Opener under its
// name from its package's init (runtime/cuda registers "cuda" in
// cuda-tagged builds); the command line opens "--device NAME" through Open,
// so it never reaches into a backend package or type-asserts its types.
// What a caller needs beyond the ops (where expert rows live, the host-to
// -device bandwidth probe, the device's name) comes back in Opened.

// Options are what opening a device may use.
type Options struct {
	Ordinal int // which device of its kind (GPU 0, ...)
	Threads int // goroutines per op on the CPU; 0 means GOMAXPROCS
}

// Opened is an open device.
type Opened struct {
	Backend backend.Backend // the op backend
	Rows    Device          // where expert rows live, on the same context
	// MeasureH2D, when the device has it, measures pinned host-to-device
	// bandwidth in bytes per second.
	MeasureH2D func() (float64, error)
	// Info, when the device has it, names the device and its driver.
	Info func() (name, driver string, err error)
	// Close waits for the device and releases it.
	Close func() error
}

// Opener opens one device of a kind.
type Opener func(Options) (*Opened, error)

// ErrUnknownDevice is returned (wrapped) by Open for a name nobody
// registered (in a build without that backend, say).
var ErrUnknownDevice = errors.New("no such device in this build")

var (
	openersMu sync.Mutex
	openers   = map[string]Opener{}
)

// Register makes a device kind openable by name. Registering a name twice
// panics: it is a build error, two backends claiming one name.
func Register(name string, open Opener) {
	openersMu.Lock()
	defer openersMu.Unlock()
	if _, dup := openers[name]; dup {
		panic(fmt.Sprintf("device: %q registered twice", name))
	}
	openers[name] = open
}

// Names lists the registered device kinds, sorted.
func Names() []string {
	openersMu.Lock()
	defer openersMu.Unlock()
	var out []string
	for n := range openers {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Registered reports whether a device kind can be opened in this build.
func Registered(name string) bool { return slices.Contains(Names(), name) }

// Open opens the device kind name.
func Open(name string, o Options) (*Opened, error) {
	openersMu.Lock()
	open := openers[name]
	openersMu.Unlock()
	if open == nil {
		return nil, fmt.Errorf("device %q: %w (this build has: %v)", name, ErrUnknownDevice, Names())
	}
	d, err := open(o)
	if err != nil {
		return nil, fmt.Errorf("open device %s: %w", name, err)
	}
	return d, nil
}
