//go:build cuda

package main

// A cuda-tagged build can rerun the workers of a cuda edition.
func init() { reproduceCUDA = true }
