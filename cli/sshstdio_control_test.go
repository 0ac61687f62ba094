package cli_test

import (
	"encoding/binary"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/internal/loopback"
)

// TestSSHStdioControlSocket: ControlMaster auto with a ControlPath that
// holds a stale socket (nothing listens), a plain file, or a socket whose
// listener is no ssh master (it answers garbage): ssh through the
// ProxyCommand does what it does with sshd, the reference, run the same
// way side by side: the same exit code, output and messages (the path and
// host names aside), and the same left at the path.
func TestSSHStdioControlSocket(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	s := newStdioSSH(t, b)
	d := startSSHD(t)
	type outcome struct {
		code           int
		stdout, stderr string
		left           string
	}
	run := func(t *testing.T, path string, setup func(string), args ...string) outcome {
		t.Helper()
		setup(path)
		c := exec.Command("ssh", append([]string{"-o", "ControlMaster=auto", "-o", "ControlPath=" + path}, args...)...)
		c.Env = s.Env
		var stdout, stderr strings.Builder
		c.Stdout, c.Stderr = &stdout, &stderr
		c.Run()
		o := outcome{code: c.ProcessState.ExitCode(), stdout: stdout.String(), stderr: strings.ReplaceAll(stderr.String(), path, "PATH")}
		switch fi, err := os.Lstat(path); {
		case err != nil:
			o.left = "nothing"
		case fi.Mode()&os.ModeSocket != 0:
			o.left = "a socket"
		default:
			o.left = "a file: " + readFile(t, path)
		}
		return o
	}
	stale := func(p string) {
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		l.SetUnlinkOnClose(false)
		l.Close()
	}
	plain := func(p string) { write(t, p, "not a socket\n") }
	impostor := func(p string) {
		loopback.Serve(t, "unix", p, func(c net.Conn) {
			// Read ssh's hello first (a 4-byte length, then the message),
			// so that ssh always reads the garbage rather than, now and
			// then, finding the socket closed.
			var n [4]byte
			if _, err := io.ReadFull(c, n[:]); err == nil {
				io.CopyN(io.Discard, c, int64(binary.BigEndian.Uint32(n[:])))
			}
			c.Write([]byte("\x00\x00\x00\x05garbage that is no mux hello\n"))
		})
	}
	for _, tc := range []struct {
		name  string
		setup func(string)
	}{{"stale", stale}, {"plain file", plain}, {"impostor", impostor}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			box := run(t, filepath.Join(dir, "box"), tc.setup, "-F", s.Config, "main.cocoonbox", "echo ok")
			ref := run(t, filepath.Join(dir, "sshd"), tc.setup, "-F", d.Config, "-p", d.Port, d.User+"@127.0.0.1", "echo ok")
			// OpenSSH runs the command in every case: directly, when the
			// socket is no master.
			if box.code != 0 || box.stdout != "ok\n" {
				t.Errorf("through the ProxyCommand: %+v; want ok", box)
			}
			if box != ref {
				t.Errorf("through the ProxyCommand: %+v\nwith sshd: %+v", box, ref)
			}
		})
	}
}
