package device

import (
	"errors"
	"testing"
)

func TestOpenByName(t *testing.T) {
	opened := 0
	Register("test-device", func(o Options) (*Opened, error) {
		opened++
		if o.Ordinal != 3 {
			return nil, errors.New("wrong ordinal")
		}
		return &Opened{Close: func() error { return nil }}, nil
	})
	if !Registered("test-device") {
		t.Fatal("not registered")
	}
	d, err := Open("test-device", Options{Ordinal: 3})
	if err != nil || d == nil || opened != 1 {
		t.Fatalf("open: %v %v %d", d, err, opened)
	}
	if _, err := Open("test-device", Options{}); err == nil {
		t.Fatal("an opener's error was lost")
	}
	if _, err := Open("no-such", Options{}); !errors.Is(err, ErrUnknownDevice) {
		t.Fatalf("unknown device: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("registering a name twice did not panic")
		}
	}()
	Register("test-device", nil)
}
