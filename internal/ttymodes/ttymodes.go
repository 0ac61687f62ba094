//go:build linux || darwin

// Package ttymodes reads and sets terminal modes in the encoding of SSH's
// pty-req (RFC 4254 section 8): an opcode byte and a uint32 value each,
// ended by TTY_OP_END (0), with OpenSSH's mapping of opcodes to termios
// (ttymodes.h).
package ttymodes

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// Get returns the termios of the terminal fd; the error is the ioctl's.
func Get(fd int) (*unix.Termios, error) { return unix.IoctlGetTermios(fd, ioctlGetTermios) }

// Set sets the termios of the terminal fd; the error is the ioctl's.
func Set(fd int, t *unix.Termios) error { return unix.IoctlSetTermios(fd, ioctlSetTermios, t) }

// Encode is t's modes in the pty-req encoding, as OpenSSH's client sends
// them: every control character and flag Apply knows, then TTY_OP_END.
func Encode(t *unix.Termios) []byte {
	var b []byte
	put := func(op byte, v uint32) {
		b = append(b, op)
		b = binary.BigEndian.AppendUint32(b, v)
	}
	for op := byte(1); op < 160; op++ {
		if i, ok := modeChars[op]; ok {
			v := uint32(t.Cc[i])
			if t.Cc[i] == vdisable {
				v = 255
			}
			put(op, v)
			continue
		}
		for _, f := range []struct {
			bits  map[byte]uint64
			field tcflag
		}{{modeIflags, t.Iflag}, {modeLflags, t.Lflag}, {modeOflags, t.Oflag}, {modeCflags, t.Cflag}} {
			if bit, ok := f.bits[op]; ok {
				v := uint32(0)
				if f.field&tcflag(bit) != 0 {
					v = 1
				}
				put(op, v)
			}
		}
	}
	return append(b, 0)
}

// The opcodes of RFC 4254 section 8 that name a control character, and
// the flags of the other opcodes, as OpenSSH's ttymodes.h maps them.
var (
	modeChars = map[byte]int{
		1: unix.VINTR, 2: unix.VQUIT, 3: unix.VERASE, 4: unix.VKILL, 5: unix.VEOF,
		6: unix.VEOL, 7: unix.VEOL2, 8: unix.VSTART, 9: unix.VSTOP, 10: unix.VSUSP,
		12: unix.VREPRINT, 13: unix.VWERASE, 14: unix.VLNEXT, 18: unix.VDISCARD,
	}
	modeIflags = map[byte]uint64{
		30: unix.IGNPAR, 31: unix.PARMRK, 32: unix.INPCK, 33: unix.ISTRIP, 34: unix.INLCR,
		35: unix.IGNCR, 36: unix.ICRNL, 38: unix.IXON, 39: unix.IXANY, 40: unix.IXOFF,
		41: unix.IMAXBEL, 42: unix.IUTF8,
	}
	modeLflags = map[byte]uint64{
		50: unix.ISIG, 51: unix.ICANON, 53: unix.ECHO, 54: unix.ECHOE, 55: unix.ECHOK,
		56: unix.ECHONL, 57: unix.NOFLSH, 58: unix.TOSTOP, 59: unix.IEXTEN, 60: unix.ECHOCTL,
		61: unix.ECHOKE, 62: unix.PENDIN,
	}
	modeOflags = map[byte]uint64{70: unix.OPOST, 72: unix.ONLCR, 73: unix.OCRNL, 74: unix.ONOCR, 75: unix.ONLRET}
	modeCflags = map[byte]uint64{90: unix.CS7, 91: unix.CS8, 92: unix.PARENB, 93: unix.PARODD}
)

// Apply sets on t the modes of the RFC 4254 encoding b: an opcode
// byte and a uint32 value each, until TTY_OP_END (0), or an opcode of 160
// and above, whose argument is unknown (both end the list, as for sshd).
// Opcodes this system lacks, and the speeds, are skipped.
func Apply(t *unix.Termios, b []byte) {
	for len(b) >= 5 && b[0] != 0 && b[0] < 160 {
		op, v := b[0], binary.BigEndian.Uint32(b[1:5])
		b = b[5:]
		if i, ok := modeChars[op]; ok {
			c := uint8(v)
			if v == 255 {
				c = vdisable
			}
			t.Cc[i] = c
			continue
		}
		for _, f := range []struct {
			bits  map[byte]uint64
			field *tcflag
		}{{modeIflags, &t.Iflag}, {modeLflags, &t.Lflag}, {modeOflags, &t.Oflag}, {modeCflags, &t.Cflag}} {
			if bit, ok := f.bits[op]; ok {
				if v != 0 {
					*f.field |= tcflag(bit)
				} else {
					*f.field &^= tcflag(bit)
				}
			}
		}
	}
}
