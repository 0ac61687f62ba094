//go:build unix

package shim

import (
	"errors"
	"syscall"
)

// brokenPipe reports whether err is a write to a pipe whose reader has
// gone (EPIPE; SIGPIPE is ignored, so the write fails instead).
func brokenPipe(err error) bool { return errors.Is(err, syscall.EPIPE) }
