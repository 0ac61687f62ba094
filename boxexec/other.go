//go:build !linux

package boxexec

import (
	"errors"
	"io"
	"os"
	"syscall"
	"time"
)

var errLinux = errors.New("the exec server runs on Linux only")

// Host is the local box's end of one box's exec server; on this system
// there is none.
type Host struct{}

// Listen fails: the exec server is Linux's.
func Listen(string) (*Host, error) { return nil, errLinux }

// ListenPeer fails: the exec server is Linux's.
func ListenPeer(string, func(int) error) (*Host, error) { return nil, errLinux }

// Connected reports false.
func (*Host) Connected() bool { return false }

// WaitConnected reports false.
func (*Host) WaitConnected(time.Duration) bool { return false }

// Await reports false.
func (*Host) Await(bool) bool { return false }

// Done is a closed channel.
func (*Host) Done() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// Drop does nothing.
func (*Host) Drop() {}

// Close does nothing.
func (*Host) Close() {}

// Start fails with ErrNoServer.
func (*Host) Start(*Request, *os.File, *os.File, *os.File) (*Cmd, error) { return nil, ErrNoServer }

// Cmd is a command the exec server started; on this system there is none.
type Cmd struct{}

// Pid is 0.
func (*Cmd) Pid() int { return 0 }

// Signal does nothing.
func (*Cmd) Signal(syscall.Signal) {}

// Resize does nothing.
func (*Cmd) Resize(uint16, uint16) {}

// Kill does nothing.
func (*Cmd) Kill(time.Duration) {}

// Output is f.
func (*Cmd) Output(f *os.File) io.ReadCloser { return f }

// Wait reports an error.
func (*Cmd) Wait() Exit { return Exit{Err: errLinux} }

// Serve fails: the exec server is Linux's.
func Serve(string) error { return errLinux }
