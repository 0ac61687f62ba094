// Package unixsock listens on and dials unix sockets whose path may be
// longer than a socket address holds (Max: 107 bytes on Linux, 103 on
// macOS), as a box run directory under a deep home or state directory
// makes it. A path within Max is used as it is. A longer one is reached
// through a short name: a symbolic link to the socket's directory, made
// in a fresh 0700 directory under /tmp (else the system's temporary
// directory) and removed once the socket is bound or connected; the kernel
// follows the link for bind and connect alike, on Linux and macOS.
package unixsock

import (
	"net"
	"os"
	"path/filepath"
	"sync"
)

// Listen listens on the unix socket at path. Closing the listener
// removes the socket file.
func Listen(path string) (net.Listener, error) {
	short, done, err := shorten(path)
	if err != nil {
		return nil, err
	}
	defer done()
	lis, err := net.Listen("unix", short)
	if err != nil {
		return nil, err
	}
	if short == path {
		return lis, nil
	}
	// The short name is gone after this; the socket file is removed by
	// its own path.
	lis.(*net.UnixListener).SetUnlinkOnClose(false)
	return &listener{Listener: lis, path: path}, nil
}

// ListenPacket listens for SOCK_SEQPACKET connections ("unixpacket") at
// path, as Listen. Closing the listener leaves the socket file: its
// caller removes it.
func ListenPacket(path string) (*net.UnixListener, error) {
	short, done, err := shorten(path)
	if err != nil {
		return nil, err
	}
	defer done()
	lis, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: short, Net: "unixpacket"})
	if err != nil {
		return nil, err
	}
	lis.SetUnlinkOnClose(false)
	return lis, nil
}

// Dial connects to the unix socket at path.
func Dial(path string) (net.Conn, error) {
	short, done, err := shorten(path)
	if err != nil {
		return nil, err
	}
	defer done()
	return net.Dial("unix", short)
}

type listener struct {
	net.Listener
	path string
	once sync.Once
}

// Close removes the socket file, then closes: in that order, as Go's
// own unix listener does, so that a server whose Accept ends with the
// close and exits at once leaves no file behind.
func (l *listener) Close() error {
	l.once.Do(func() { os.Remove(l.path) })
	return l.Listener.Close()
}

// shorten returns a name for path within Max and a func that removes
// what it made for it.
func shorten(path string) (string, func(), error) {
	if len(path) <= Max {
		return path, func() {}, nil
	}
	tmp := "/tmp"
	if fi, err := os.Stat(tmp); err != nil || !fi.IsDir() {
		tmp = os.TempDir()
	}
	dir, err := os.MkdirTemp(tmp, "cbsock-")
	if err != nil {
		return "", nil, err
	}
	done := func() { os.RemoveAll(dir) }
	link := filepath.Join(dir, "d")
	target, err := filepath.Abs(filepath.Dir(path))
	if err == nil {
		err = os.Symlink(target, link)
	}
	if err != nil {
		done()
		return "", nil, err
	}
	return filepath.Join(link, filepath.Base(path)), done, nil
}
