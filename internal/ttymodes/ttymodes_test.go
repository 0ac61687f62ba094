//go:build linux || darwin

package ttymodes

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// TestEncodeApply: what Encode says of one termios, Apply makes of
// another, control characters (a disabled one as 255), flags set and
// cleared.
func TestEncodeApply(t *testing.T) {
	var src unix.Termios
	src.Cc[unix.VINTR], src.Cc[unix.VERASE], src.Cc[unix.VKILL] = 0x07, 0x08, vdisable
	src.Iflag = unix.ICRNL | unix.IXON
	src.Lflag = unix.ISIG | unix.ICANON | unix.ECHO
	src.Oflag = unix.OPOST | unix.ONLCR
	src.Cflag = unix.CS8
	b := Encode(&src)
	if b[len(b)-1] != 0 || (len(b)-1)%5 != 0 {
		t.Fatalf("encoding of %d bytes does not end in TTY_OP_END after whole entries", len(b))
	}
	for i := 0; i+5 <= len(b); i += 5 {
		if b[i] == 4 && binary.BigEndian.Uint32(b[i+1:]) != 255 {
			t.Errorf("a disabled VKILL is sent as %d, want 255", binary.BigEndian.Uint32(b[i+1:]))
		}
	}
	var dst unix.Termios
	dst.Iflag, dst.Lflag = unix.IXOFF, unix.ECHOE
	dst.Cc[unix.VKILL] = 0x15
	Apply(&dst, b)
	if dst.Cc != src.Cc || dst.Iflag != src.Iflag || dst.Lflag != src.Lflag || dst.Oflag != src.Oflag || dst.Cflag&unix.CSIZE != unix.CS8 {
		t.Errorf("applied %+v\nwant the modes of %+v", dst, src)
	}
	// An opcode of 160 and above ends the list: its argument is unknown.
	var stop unix.Termios
	Apply(&stop, []byte{160, 0, 0, 0, 1, 1, 0, 0, 0, 7, 0})
	if stop.Cc[unix.VINTR] != 0 {
		t.Error("a mode after opcode 160 was applied")
	}
}
