//go:build !linux

package cli

// growPipes does nothing where pipes cannot be resized.
func growPipes(streams ...any) {}
