//go:build cuda

package main

// A cuda-tagged build registers the "cuda" device (runtime/cuda's init), so
// that openDevice opens it by name.
import _ "github.com/horizon-runmap/horizon/runtime/cuda"

func init() { cudaBuild = true }
