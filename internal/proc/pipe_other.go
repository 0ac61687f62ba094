//go:build !linux

package proc

import "os"

// GrowPipe does nothing: only Linux lets a pipe's buffer grow.
func GrowPipe(*os.File, int) {}
