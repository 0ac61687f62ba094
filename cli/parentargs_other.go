//go:build !linux && !darwin

package cli

// parentArgs is nil where the parent's command line is not read.
func parentArgs() []string { return nil }
