package ttymodes

import "golang.org/x/sys/unix"

// The termios requests, flag type and disabled control character of
// Linux.
const (
	ioctlGetTermios = unix.TCGETS
	ioctlSetTermios = unix.TCSETS
	vdisable        = 0
)

type tcflag = uint32
