package localbox

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// peerUID is the uid of the user that made the socket at peer, an address
// of this machine, connected to local (this server's end of a TCP
// connection), as the kernel's tables of TCP sockets (/proc/net/tcp and
// tcp6) hold it; false when no open socket of a user is there (not this
// machine's, or closed already: the kernel then keeps it as no one's).
func peerUID(local, peer netip.AddrPort) (uint32, bool) {
	local = netip.AddrPortFrom(local.Addr().Unmap(), local.Port())
	peer = netip.AddrPortFrom(peer.Addr().Unmap(), peer.Port())
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		if uid, ok := peerUIDIn(f, local, peer); ok {
			return uid, true
		}
	}
	return 0, false
}

// peerUIDIn is peerUID by one table.
func peerUIDIn(table string, local, peer netip.AddrPort) (uint32, bool) {
	f, err := os.Open(table)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		fs := strings.Fields(sc.Text())
		if len(fs) < 10 {
			continue
		}
		if a, ok := procAddr(fs[1]); !ok || a != peer {
			continue
		}
		if a, ok := procAddr(fs[2]); !ok || a != local {
			continue
		}
		// An orphaned socket (its maker closed it) has inode 0 and uid 0,
		// which is not root's.
		if fs[9] == "0" {
			return 0, false
		}
		uid, err := strconv.ParseUint(fs[7], 10, 32)
		return uint32(uid), err == nil
	}
	return 0, false
}

// procAddr parses an address of /proc/net/tcp: the address in hex, by
// 32-bit words in the machine's byte order, a colon and the port in hex.
func procAddr(s string) (netip.AddrPort, bool) {
	h, p, ok := strings.Cut(s, ":")
	port, err := strconv.ParseUint(p, 16, 16)
	raw, herr := hex.DecodeString(h)
	if !ok || err != nil || herr != nil || len(raw) != 4 && len(raw) != 16 {
		return netip.AddrPort{}, false
	}
	b := make([]byte, len(raw))
	for i := 0; i < len(raw); i += 4 {
		binary.NativeEndian.PutUint32(b[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	a, _ := netip.AddrFromSlice(b)
	return netip.AddrPortFrom(a.Unmap(), uint16(port)), true
}
