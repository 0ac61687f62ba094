//go:build linux || darwin

package cli_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/creack/pty"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// ptyRun is cocoonbox-ssh running with a PTY the test made as its
// controlling terminal and stdio, as a user's terminal would be.
type ptyRun struct {
	t         *testing.T
	ptmx, tty *os.File
	cmd       *exec.Cmd
	orig      unix.Termios
	chunks    chan []byte
	exited    chan struct{}
	out       []byte // read from the terminal so far
	seen      int    // how much of out waitFor has matched
	drained   bool
}

// endMark is written to the terminal by the test after cocoonbox-ssh has
// exited: once read back, everything it wrote has been read.
const endMark = "\x01end of output\x01"

// startOnPTY runs cocoonbox-ssh with args on a new 24x80 PTY whose termios
// is first made unlike the default, so that restoring it is a real test.
func startOnPTY(t *testing.T, env []string, args ...string) *ptyRun {
	t.Helper()
	return startProgOnPTY(t, "cocoonbox-ssh", env, args...)
}

// startProgOnPTY is startOnPTY for program prog, found on the PATH.
func startProgOnPTY(t *testing.T, prog string, env []string, args ...string) *ptyRun {
	t.Helper()
	shim, err := exec.LookPath(prog)
	if err != nil {
		t.Fatal(err)
	}
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ptmx.Close(); tty.Close() })
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 24, Cols: 80}); err != nil {
		t.Fatal(err)
	}
	tio, err := unix.IoctlGetTermios(int(tty.Fd()), tcgets)
	if err != nil {
		t.Fatal(err)
	}
	tio.Lflag &^= unix.ECHOCTL | unix.ECHOKE
	tio.Iflag |= unix.IUTF8
	tio.Cc[unix.VERASE] = 0x08
	tio.Cc[unix.VMIN], tio.Cc[unix.VTIME] = 2, 7
	if err := unix.IoctlSetTermios(int(tty.Fd()), tcsets, tio); err != nil {
		t.Fatal(err)
	}
	p := &ptyRun{t: t, ptmx: ptmx, tty: tty, orig: *tio, chunks: make(chan []byte, 64), exited: make(chan struct{})}
	p.cmd = exec.Command(shim, args...)
	p.cmd.Env = env
	p.cmd.Stdin, p.cmd.Stdout, p.cmd.Stderr = tty, tty, tty
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := ptmx.Read(b)
			if n > 0 {
				p.chunks <- bytes.Clone(b[:n])
			}
			if err != nil {
				close(p.chunks)
				return
			}
		}
	}()
	go func() {
		p.cmd.Wait()
		close(p.exited)
	}()
	return p
}

// waitFor reads the terminal until s appears after the last match.
func (p *ptyRun) waitFor(s string) {
	p.t.Helper()
	for {
		if i := bytes.Index(p.out[p.seen:], []byte(s)); i >= 0 {
			p.seen += i + len(s)
			return
		}
		if p.drained {
			p.t.Fatalf("cocoonbox-ssh exited without writing %q; the terminal shows:\n%q", s, p.out)
		}
		select {
		case c, ok := <-p.chunks:
			if !ok {
				p.t.Fatalf("terminal closed before %q; it shows:\n%q", s, p.out)
			}
			p.out = append(p.out, c...)
		case <-p.exited:
			p.drain()
		}
	}
}

// resize gives the terminal a new size: the kernel sends SIGWINCH to
// its foreground process group, cocoonbox-ssh's.
func (p *ptyRun) resize(rows, cols uint16) {
	p.t.Helper()
	if err := pty.Setsize(p.ptmx, &pty.Winsize{Rows: rows, Cols: cols}); err != nil {
		p.t.Fatal(err)
	}
}

// drain reads all cocoonbox-ssh wrote, after it has exited.
func (p *ptyRun) drain() {
	p.t.Helper()
	if p.drained {
		return
	}
	if _, err := p.tty.Write([]byte(endMark)); err != nil {
		p.t.Fatal(err)
	}
	for !bytes.Contains(p.out, []byte(endMark)) {
		c, ok := <-p.chunks
		if !ok {
			p.t.Fatal("terminal closed")
		}
		p.out = append(p.out, c...)
	}
	p.out = bytes.Replace(p.out, []byte(endMark), nil, 1)
	p.drained = true
}

func (p *ptyRun) write(s string) {
	p.t.Helper()
	if _, err := p.ptmx.Write([]byte(s)); err != nil {
		p.t.Fatal(err)
	}
}

// wantExit waits for cocoonbox-ssh to end, checks its exit status, and
// checks that it gave the terminal back exactly as it found it, field by
// field.
func (p *ptyRun) wantExit(code int) {
	p.t.Helper()
	<-p.exited
	p.drain()
	if got := p.cmd.ProcessState.ExitCode(); got != code {
		p.t.Errorf("exit status %d, want %d; the terminal shows:\n%q", got, code, p.out)
	}
	tio, err := unix.IoctlGetTermios(int(p.tty.Fd()), tcgets)
	if err != nil {
		p.t.Fatal(err)
	}
	if diff := cmp.Diff(p.orig, *tio); diff != "" {
		p.t.Errorf("termios after exit differs from the original (-original +after):\n%s", diff)
	}
}

func ttyEnv(b *testBox) []string {
	return append(append([]string{}, b.Env...), "TERM=xterm-256color")
}

// TestSSHTerminalRawBytes: with -t the local terminal is raw, so Ctrl-C,
// the arrow keys and a NUL reach the box as bytes, not as signals or
// edits.
func TestSSHTerminalRawBytes(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	p := startOnPTY(t, ttyEnv(b), "-t", "main", `stty raw -echo; echo READY; head -c 11 | od -An -tx1; stty sane; echo "TERM=$TERM"`)
	p.waitFor("READY")
	// Ctrl-C, Up, NUL, Down, Ctrl-\, Ctrl-Z, Ctrl-D.
	p.write("\x03\x1b[A\x00\x1b[B\x1c\x1a\x04")
	p.waitFor(" 03 1b 5b 41 00 1b 5b 42 1c 1a 04")
	p.waitFor("TERM=xterm-256color")
	p.wantExit(0)
	// Written after the termios is restored, as ssh does, so ONLCR adds a \r.
	p.waitFor("Connection to main closed.\r\r\n")
}

// TestSSHTerminalResize: the terminal's size reaches the box at the start,
// and again after a SIGWINCH.
func TestSSHTerminalResize(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	p := startOnPTY(t, ttyEnv(b), "-t", "main", `stty size; trap 'stty size; exit 0' WINCH; echo READY; while :; do sleep 0.1; done`)
	p.waitFor("24 80\r\n")
	p.waitFor("READY")
	p.resize(40, 100)
	p.waitFor("40 100\r\n")
	p.wantExit(0)
}

// TestSSHTerminalEscapes: ~? lists the escapes, ~~ sends one ~, a ~ after
// other input is plain, and ~. at a line's start disconnects with 255.
func TestSSHTerminalEscapes(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	p := startOnPTY(t, ttyEnv(b), "-t", "main", `echo READY; sed -u 's/^/got:/'`)
	p.waitFor("READY")
	p.write("~?")
	p.waitFor("Supported escape sequences:\r\n")
	p.waitFor("(Note that escapes are only recognized immediately after newline.)\r\n")
	p.write("~~x~.\r")
	p.waitFor("got:~x~.")
	p.write("~.")
	p.wantExit(255)
	// Written after the termios is restored, as ssh does, so ONLCR adds a \r.
	p.waitFor("Connection to main closed.\r\r\n")
}

// TestSSHTerminalEscapeNone: with -e none, ~. is plain input.
func TestSSHTerminalEscapeNone(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	p := startOnPTY(t, ttyEnv(b), "-e", "none", "-t", "main", `echo READY; sed -u 's/^/got:/'`)
	p.waitFor("READY")
	p.write("~.\r")
	p.waitFor("got:~.")
	p.write("\x04") // end of input for the box's terminal: sed ends
	p.wantExit(0)
}

// TestSSHTerminalTerminfo: TERM and the local compiled terminfo entry reach
// the box, so a terminal the box has never heard of works there.
func TestSSHTerminalTerminfo(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	dir, local := localTerminfo(t, "cocoonbox-test-term")
	env := append(append([]string{}, b.Env...), "TERM=cocoonbox-test-term", "TERMINFO="+dir)
	p := startOnPTY(t, env, "-t", "main", fmt.Sprintf(`echo "TERM=$TERM"; cmp %s ~/.terminfo/c/cocoonbox-test-term && tput clear >/dev/null && echo TERMINFO-OK`, local))
	p.waitFor("TERM=cocoonbox-test-term\r\n")
	p.waitFor("TERMINFO-OK\r\n")
	p.wantExit(0)
}

// TestSSHTerminalRestoredOnEveryExit: whichever way the session ends, the
// terminal's termios is the original, field by field (seeds/002).
func TestSSHTerminalRestoredOnEveryExit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		host    string
		command string
		end     func(p *ptyRun, b *testBox)
		code    int
		stderr  string // a line the terminal shows, if any
		env     []string
	}{
		{name: "normal exit", command: "echo READY; exit 3", code: 3},
		// A resumable terminal would wait out its window for the server.
		{name: "remote close", command: "echo READY; sleep 600", code: 255, end: func(p *ptyRun, b *testBox) { b.srv.Stop() }, stderr: "cocoonbox-ssh: ", env: []string{"COCOONBOX_RESUME=off"}},
		{name: "error", host: "nobox", code: 255, stderr: `no box "nobox"`},
		{name: "escape", command: "echo READY; sleep 600", code: 255, end: func(p *ptyRun, b *testBox) { p.write("\r~.") }},
		{name: "SIGTERM", command: "echo READY; sleep 600", code: 255, end: func(p *ptyRun, b *testBox) { p.cmd.Process.Signal(syscall.SIGTERM) }},
		{name: "SIGHUP", command: "echo READY; sleep 600", code: 255, end: func(p *ptyRun, b *testBox) { p.cmd.Process.Signal(syscall.SIGHUP) }},
		{name: "SIGINT", command: "echo READY; sleep 600", code: 255, end: func(p *ptyRun, b *testBox) { p.cmd.Process.Signal(syscall.SIGINT) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := startBox(t)
			host := "main"
			if tt.host != "" {
				host = tt.host
			}
			p := startOnPTY(t, append(ttyEnv(b), tt.env...), "-t", host, tt.command)
			if tt.end != nil {
				p.waitFor("READY")
				tt.end(p, b)
			}
			p.wantExit(tt.code)
			if tt.stderr != "" && !strings.Contains(string(p.out), tt.stderr) {
				t.Errorf("terminal does not show %q:\n%q", tt.stderr, p.out)
			}
		})
	}
}

// localTerminfo copies the system's compiled xterm entry to a terminfo
// directory of the test's own under name, so a terminal type the box has
// never heard of exists on the laptop side; it returns the directory (for
// TERMINFO) and the entry's path.
func localTerminfo(t *testing.T, name string) (dir, entry string) {
	t.Helper()
	src := ""
	for _, d := range []string{"/usr/share/terminfo", "/lib/terminfo", "/etc/terminfo"} {
		if _, err := os.Stat(filepath.Join(d, "x", "xterm")); err == nil {
			src = filepath.Join(d, "x", "xterm")
			break
		}
	}
	if src == "" {
		t.Fatal("no compiled terminfo entry for xterm: install ncurses-base")
	}
	dir = t.TempDir()
	entry = filepath.Join(dir, name[:1], name)
	if err := os.MkdirAll(filepath.Dir(entry), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, entry, readFile(t, src))
	return dir, entry
}
