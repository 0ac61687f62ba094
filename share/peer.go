//go:build linux || darwin

package share

import (
	"fmt"
	"io/fs"
	"net"
	"os"
	"syscall"
)

// sharingSupported: Linux and macOS name a unix socket's peer.
const sharingSupported = true

func ownedByMe(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Getuid()
}

// peerIsMe checks that the process at the other end of c runs as this user.
func peerIsMe(c net.Conn) error {
	raw, err := c.(*net.UnixConn).SyscallConn()
	if err != nil {
		return err
	}
	uid := -1
	raw.Control(func(fd uintptr) { uid = peerUID(int(fd)) })
	if uid != os.Getuid() {
		return fmt.Errorf("the control master's socket is served by uid %d, not this user", uid)
	}
	return nil
}
