//go:build !linux

package localbox

import "net/netip"

// peerUID would be the uid of the user that made the socket at peer,
// connected to local; it is known on Linux alone.
func peerUID(local, peer netip.AddrPort) (uint32, bool) { return 0, false }
