//go:build unix

package cli_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/crypto/ssh"
)

// TestSSHStdioSFTPSmall: SFTP sessions of many small requests through
// cocoonbox-ssh --stdio, byte for byte, from OpenSSH's sftp (1 KiB and
// 2 KiB reads and writes, a thousand at a time: more than the session's
// SFTP queue holds, so requests wait for answers) and from PuTTY's pscp
// and psftp (4 KiB writes for as long as the SSH window lets them, which
// made the box's sftp-server quadratic: docs/benchmarks.md, "pscp").
func TestSSHStdioSFTPSmall(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"sftp", "pscp", "psftp"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%v: scripts/deps.sh installs it", err)
		}
	}
	b := startBox(t)
	s := newStdioSSH(t, b)
	local := t.TempDir()
	data := make([]byte, 3<<20+17)
	for i := range data {
		data[i] = byte(i*7%251 + i/4093)
	}
	src := filepath.Join(local, "src.bin")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	same := func(what, path string) {
		t.Helper()
		got, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s: %v", what, err)
			return
		}
		if string(got) != string(data) {
			t.Errorf("%s: %d bytes differ from the %d sent", what, len(got), len(data))
		}
	}

	for _, buf := range []string{"1024", "2048"} {
		batch := filepath.Join(local, "batch-"+buf)
		up, down := "openssh-"+buf, filepath.Join(local, "openssh-down-"+buf)
		write(t, batch, fmt.Sprintf("put %q %s\nget %s %q\n", src, up, up, down))
		runOK(t, inEnv(exec.Command("sftp", "-q", "-B", buf, "-R", "1024", "-F", s.Config, "-b", batch, "main.cocoonbox"), s.Env))
		same("sftp -B "+buf+" put", filepath.Join(b.Workspace, up))
		same("sftp -B "+buf+" get", down)
	}

	// PuTTY: the host key pinned by its fingerprint, --stdio as the proxy.
	putty := []string{"-batch", "-hostkey", ssh.FingerprintSHA256(s.Key), "-proxycmd", s.Shim + " --stdio main.cocoonbox", "-l", "user"}
	runOK(t, inEnv(exec.Command("pscp", append(append([]string{"-q", "-sftp"}, putty...), src, "main.cocoonbox:pscp.bin")...), s.Env))
	same("pscp up", filepath.Join(b.Workspace, "pscp.bin"))
	runOK(t, inEnv(exec.Command("pscp", append(append([]string{"-q", "-sftp"}, putty...), "main.cocoonbox:pscp.bin", filepath.Join(local, "pscp-down"))...), s.Env))
	same("pscp down", filepath.Join(local, "pscp-down"))

	batch := filepath.Join(local, "psftp-batch")
	write(t, batch, fmt.Sprintf("put %q psftp.bin\nget psftp.bin %q\n", src, filepath.Join(local, "psftp-down")))
	runOK(t, inEnv(exec.Command("psftp", append(append([]string{"-b", batch}, putty...), "main.cocoonbox")...), s.Env))
	same("psftp put", filepath.Join(b.Workspace, "psftp.bin"))
	same("psftp get", filepath.Join(local, "psftp-down"))
}
