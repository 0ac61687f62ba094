package boxsession

import (
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// checkPeer refuses a connection to sock whose listener is not this
// user's (SO_PEERCRED): a second layer behind the private directory, for
// a directory swapped between its check and the dial.
func checkPeer(c net.Conn, sock string) error {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil
	}
	rc, err := uc.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	if cerr := rc.Control(func(fd uintptr) { cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); cerr != nil {
		return cerr
	}
	if err != nil {
		return err
	}
	if int(cred.Uid) != os.Getuid() {
		return fmt.Errorf("%s is served by uid %d, not this user: not a holder of ours; remove it", sock, cred.Uid)
	}
	return nil
}
