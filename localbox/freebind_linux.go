package localbox

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// freebind lets a listener bind an address no interface holds yet: a box
// network's gateway, whose bridge the engine may bring up after.
func freebind(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_FREEBIND, 1)
	})
	if err != nil {
		return err
	}
	return serr
}
