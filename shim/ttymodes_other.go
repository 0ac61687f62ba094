//go:build !linux && !darwin

package shim

// terminalModes is nil where termios is not read: the box keeps its
// terminal's defaults.
func terminalModes(fd int) []byte { return nil }
