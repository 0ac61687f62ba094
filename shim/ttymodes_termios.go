//go:build linux || darwin

package shim

import "github.com/cocoonbox/cocoonbox/internal/ttymodes"

// terminalModes is the terminal fd's modes as ssh sends them in its
// pty-req (RFC 4254 section 8); nil when they cannot be read.
func terminalModes(fd int) []byte {
	t, err := ttymodes.Get(fd)
	if err != nil {
		return nil
	}
	return ttymodes.Encode(t)
}
