//go:build !unix

package rawio

import (
	"errors"
	"syscall"
)

// supported is false: Windows has no raw reads of a descriptor in the
// poller (its handles are completion ports'), so Conn and Reader leave
// everything as it was.
const supported = false

var errUnsupported = errors.New("rawio: not supported on this platform")

func nonblocking(syscall.RawConn) bool { return false }

func read(syscall.RawConn, []byte) (int, error)  { return 0, errUnsupported }
func write(syscall.RawConn, []byte) (int, error) { return 0, errUnsupported }
