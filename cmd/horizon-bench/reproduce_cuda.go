//go:build cuda

package main

// A cuda-tagged build can run a cuda campaign and rerun the workers of a
// cuda edition.
func init() { buildCUDA = true }
