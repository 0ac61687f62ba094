package ttymodes

import "golang.org/x/sys/unix"

// The termios requests, flag type and disabled control character of
// macOS.
const (
	ioctlGetTermios = unix.TIOCGETA
	ioctlSetTermios = unix.TIOCSETA
	vdisable        = 0xff
)

type tcflag = uint64
