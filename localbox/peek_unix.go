//go:build unix

package localbox

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// peerState is what the peer of c has sent that no one has read yet:
// pending when bytes wait, gone when it has closed or reset the
// connection (or c is closed); neither when nothing waits, or c is no
// socket. It peeks without waiting, and without taking the lock of a
// read in progress.
func peerState(c net.Conn) (pending, gone bool) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false, true
	}
	var b [1]byte
	cerr := rc.Control(func(fd uintptr) {
		n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		switch {
		case n > 0:
			pending = true
		case err == unix.EAGAIN || err == unix.EWOULDBLOCK || err == unix.EINTR:
		default:
			// 0 bytes and no error is the peer's FIN; an error, its RST.
			gone = true
		}
	})
	if cerr != nil {
		return false, true
	}
	return pending, gone
}
