//go:build !unix

package relay

import (
	"context"
	"errors"
	"io"
)

// ListenError is a listener that could not listen (unix only).
type ListenError struct {
	Addr string
	Err  error
}

func (e *ListenError) Error() string { return "listen " + e.Addr + ": " + e.Err.Error() }
func (e *ListenError) Unwrap() error { return e.Err }

var errNoBoxHalf = errors.New("the box half of a listener runs on Linux and macOS only")

// ServeListener is the box half of a listener; it runs in Linux and
// macOS boxes only.
func ServeListener(context.Context, ListenSpec, io.Reader, io.Writer) error { return errNoBoxHalf }

// Take is the box half of an accepted connection; it runs in Linux and
// macOS boxes only.
func Take(string, uint64, io.Reader, io.Writer, io.Writer) error { return errNoBoxHalf }
