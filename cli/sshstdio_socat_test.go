package cli_test

import (
	"io"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestSSHStdioSocat: cocoonbox-ssh --stdio run by socat's default EXEC,
// whose child's stdin and stdout are one end of a socketpair (rclone's
// docs run a custom ssh so), as the ProxyCommand of OpenSSH's ssh: a 100
// MiB download arrives whole, as it does through sshd -i run the same
// way. Before, stdin's non-blocking mode was stdout's too, and the
// download stalled at the first write that found the socket full.
func TestSSHStdioSocat(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("socat"); err != nil {
		t.Fatalf("%v: install socat (scripts/deps.sh)", err)
	}
	const size = 100 << 20
	download := "head -c 104857600 /dev/zero"
	b := startBox(t)
	s := newStdioSSH(t, b)
	ours := s.cmd("-o", "ProxyCommand=socat - EXEC:'"+s.Shim+" --stdio main'", "main.cocoonbox", download)
	d := startSSHD(t)
	cfg := filepath.Join(filepath.Dir(d.Config), "sshd_config")
	theirs := exec.Command("ssh", "-F", d.Config, "-o", "ProxyCommand=socat - EXEC:'"+sshdPath+" -i -f "+cfg+"'",
		"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-l", d.User, "sshd-i", download)
	for _, c := range []struct {
		name string
		cmd  *exec.Cmd
	}{{"sshd -i", theirs}, {"cocoonbox-ssh --stdio", ours}} {
		out, err := c.cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr limitedBuffer
		c.cmd.Stderr = &stderr
		if err := c.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, out)
		err = c.cmd.Wait()
		if n != size || err != nil {
			t.Errorf("%s under socat: %d bytes of %d, %v\n%s", c.name, n, size, err, stderr.String())
		}
	}
}

// limitedBuffer keeps the first 64 KiB written to it.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 64<<10 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return string(l.b) }
