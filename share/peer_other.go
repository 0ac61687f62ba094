//go:build !linux && !darwin

package share

import (
	"errors"
	"io/fs"
	"net"
)

// sharingSupported: connection sharing needs the peer of a unix socket
// named, which this code asks of Linux and macOS only.
const sharingSupported = false

func ownedByMe(fs.FileInfo) bool { return false }

func peerIsMe(net.Conn) error { return errors.New("connection sharing is not supported here") }
