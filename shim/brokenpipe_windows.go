package shim

import (
	"errors"
	"syscall"

	"golang.org/x/sys/windows"
)

// brokenPipe reports whether err is a write to a pipe whose reader has
// gone: Windows says ERROR_NO_DATA ("the pipe is being closed") or
// ERROR_BROKEN_PIPE where Unix says EPIPE.
func brokenPipe(err error) bool {
	return errors.Is(err, windows.ERROR_NO_DATA) || errors.Is(err, syscall.ERROR_BROKEN_PIPE) || errors.Is(err, syscall.EPIPE)
}
