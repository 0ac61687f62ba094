package cli_test

import "golang.org/x/sys/unix"

// The ioctls that read and set a terminal's termios.
const tcgets, tcsets = unix.TIOCGETA, unix.TIOCSETA
