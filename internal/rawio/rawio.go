// Package rawio reads and writes non-blocking descriptors that Go's
// poller watches with raw system calls, which do not tell the runtime
// they are made.
//
// Each system call a goroutine makes through package syscall tells the
// runtime (entersyscall); when every P was idle, that wakes the runtime's
// monitor thread, sysmon, which then naps 20 µs at a time until the
// process is idle again. A relay of small requests (an sftp request's
// round trip through cocoonbox-ssh --stdio and the local box) wakes from
// the poller, reads, writes and goes back to the poller once a request
// each way, and so woke sysmon twice a request in each Go process on the
// path: a futex call, a thread switched in on the other CPU and its naps,
// a fifth to a third of each process's CPU (docs/benchmarks.md, "sftp
// requests through ssh --stdio"). A read or write of a non-blocking
// descriptor never blocks, so it needs no P handed off while it runs,
// which is all the runtime's bookkeeping is for: made raw, it costs the
// system call alone. Waiting stays the poller's (syscall.RawConn's Read
// and Write), so deadlines and Close work as on the wrapped value.
package rawio

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
)

// Conn returns c with Read and Write made as raw system calls on its
// descriptor, when c is a connection with a non-blocking one (a TCP or
// unix socket of package net); else c itself. Everything else is c's.
func Conn(c net.Conn) net.Conn {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return c
	}
	rc := rawConn(sc)
	if rc == nil {
		return c
	}
	return &conn{Conn: c, rc: rc}
}

// rawConn is f's syscall.RawConn when its descriptor is non-blocking (a
// raw read of a blocking one would hold a P for as long as it waits);
// nil otherwise, or where the platform has no raw reads.
func rawConn(f syscall.Conn) syscall.RawConn {
	if !supported {
		return nil
	}
	rc, err := f.SyscallConn()
	if err != nil || !nonblocking(rc) {
		return nil
	}
	return rc
}

type conn struct {
	net.Conn
	rc syscall.RawConn
}

// SyscallConn is c's own: callers that peek or set options on the
// descriptor (the local box's gate) still reach it.
func (c *conn) SyscallConn() (syscall.RawConn, error) { return c.rc, nil }

func (c *conn) Read(p []byte) (int, error) {
	n, err := read(c.rc, p)
	if err != nil && err != io.EOF {
		err = &net.OpError{Op: "read", Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
	}
	return n, err
}

func (c *conn) Write(p []byte) (int, error) {
	n, err := write(c.rc, p)
	if err != nil {
		err = &net.OpError{Op: "write", Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
	}
	return n, err
}

// File returns f with Read and Write made as raw system calls, when its
// descriptor is non-blocking and in the poller (os.Pipe's ends, or
// proc.Pollable's duplicate); else f itself. Close closes f.
func File(f *os.File) io.ReadWriteCloser {
	rc := rawConn(f)
	if rc == nil {
		return f
	}
	return &file{f: f, rc: rc}
}

type file struct {
	f  *os.File
	rc syscall.RawConn
}

func (f *file) Read(p []byte) (int, error) {
	n, err := read(f.rc, p)
	if err != nil && err != io.EOF {
		err = pathError("read", f.f, err)
	}
	return n, err
}

func (f *file) Write(p []byte) (int, error) {
	n, err := write(f.rc, p)
	if err != nil {
		err = pathError("write", f.f, err)
	}
	return n, err
}

// pathError is err as os.File's Read and Write give it: the poller's
// answer for a file closed meanwhile is os.ErrClosed.
func pathError(op string, f *os.File, err error) error {
	var se *os.SyscallError
	if !errors.As(err, &se) && !errors.Is(err, os.ErrDeadlineExceeded) {
		err = os.ErrClosed
	}
	return &os.PathError{Op: op, Path: f.Name(), Err: err}
}

func (f *file) Close() error { return f.f.Close() }

// Listener returns l with each accepted connection passed through Conn.
func Listener(l net.Listener) net.Listener { return listener{l} }

type listener struct{ net.Listener }

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return Conn(c), nil
}

// SmallWrites returns a writer of f, a pipe whose description blocks,
// that makes each write shorter than below a raw system call on a second,
// non-blocking description of the same pipe (waiting in the poller while
// the pipe is full), and passes longer ones to f: an answer to a request
// then wakes no sysmon, and a transfer's large writes still block in the
// kernel rather than wait in the poller (which cost more CPU, cli's
// stdioIn). Its Close closes both. Where no second description can be
// had (not a pipe, not Linux), f itself.
func SmallWrites(f *os.File, below int) io.WriteCloser {
	nb := reopenNonblocking(f)
	if nb == nil {
		return f
	}
	rc := rawConn(nb)
	if rc == nil {
		nb.Close()
		return f
	}
	return &smallWrites{f: f, nb: nb, rc: rc, below: below}
}

type smallWrites struct {
	f, nb *os.File
	rc    syscall.RawConn
	below int
}

func (w *smallWrites) Write(p []byte) (int, error) {
	if len(p) >= w.below {
		return w.f.Write(p)
	}
	n, err := write(w.rc, p)
	if err != nil {
		err = pathError("write", w.f, err)
	}
	return n, err
}

func (w *smallWrites) Close() error {
	w.nb.Close()
	return w.f.Close()
}
