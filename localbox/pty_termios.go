//go:build linux || darwin

package localbox

import (
	"encoding/binary"
	"os"
	"os/exec"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// startPTY starts cmd on a new terminal of size ws, as its session's
// controlling terminal, and returns the terminal's master side. Unlike
// pty.StartWithSize it names the terminal in SSH_TTY first and sets the
// client's terminal modes on it (RFC 4254 section 8), as sshd does.
func startPTY(cmd *exec.Cmd, ws *pty.Winsize, modes []byte) (*os.File, error) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		return nil, err
	}
	defer tty.Close()
	if err := pty.Setsize(ptmx, ws); err != nil {
		ptmx.Close()
		return nil, err
	}
	if len(modes) > 0 {
		// As sshd, modes that cannot be set leave the terminal as it was.
		if t, err := unix.IoctlGetTermios(int(tty.Fd()), ioctlGetTermios); err == nil {
			applyModes(t, modes)
			unix.IoctlSetTermios(int(tty.Fd()), ioctlSetTermios, t)
		}
	}
	cmd.Env = append(cmd.Env, "SSH_TTY="+tty.Name())
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr.Setsid = true
	cmd.SysProcAttr.Setctty = true
	if err := cmd.Start(); err != nil {
		ptmx.Close()
		return nil, err
	}
	return ptmx, nil
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

// applyModes sets on t the modes of the RFC 4254 encoding b: an opcode
// byte and a uint32 value each, until TTY_OP_END (0), or an opcode of 160
// and above, whose argument is unknown (both end the list, as for sshd).
// Opcodes this system lacks, and the speeds, are skipped.
func applyModes(t *unix.Termios, b []byte) {
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
