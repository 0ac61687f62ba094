package boxsession

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A holder.sock that another user listens on, found in our private
// directory (moved there between the directory's check and the dial): list,
// open and attach refuse it after connecting and send it nothing, and
// take nothing it says.
func TestStrangersHolderRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a stranger's listener needs a second user")
	}
	top := t.TempDir()
	for _, d := range []string{filepath.Dir(top), top} {
		os.Chmod(d, 0o711)
	}
	theirs := filepath.Join(top, "theirs")
	if err := os.Mkdir(theirs, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(theirs, 0o777)
	got := filepath.Join(theirs, "got")
	// nobody's holder: each connection gets a session of its own making,
	// and what the client sent is kept.
	py := `
import socket, sys, os
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1]); s.listen(8)
open(sys.argv[1] + ".up", "w").close()
while True:
    c, _ = s.accept()
    c.settimeout(2)
    try:
        data = c.recv(65536)
    except OSError:
        data = b""
    with open(sys.argv[2], "ab") as f:
        f.write(data)
    try:
        c.sendall(b'{"id":"deadbeef","line":"planted","attached":false,"started_ms":1}\n')
    except OSError:
        pass
    c.close()
`
	sock := filepath.Join(theirs, "s")
	cmd := exec.Command("runuser", "-u", "nobody", "--", "python3", "-c", py, sock, got)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// runuser's python child too.
	defer func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() }()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(sock + ".up"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("nobody's listener did not come up")
		}
	}
	dir := filepath.Join(top, "sessions")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(sock, filepath.Join(dir, "holder.sock")); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := List(dir, &out); err == nil || !strings.Contains(err.Error(), "not this user") || out.Len() > 0 {
		t.Errorf("list: %v, printed %q; want the refusal and nothing", err, out.String())
	}
	t.Setenv("COCOONBOX_B36_SECRET", "s3cret")
	if err := Open(dir, "/bin/false", nil, "0123", time.Minute, "echo s3cret-line", strings.NewReader(""), io.Discard); err == nil || !strings.Contains(err.Error(), "not this user") {
		t.Errorf("open: %v, want the refusal", err)
	}
	if err := Attach(dir, "/bin/false", nil, "0123", strings.NewReader(""), io.Discard); err == nil || !strings.Contains(err.Error(), "not this user") {
		t.Errorf("attach: %v, want the refusal", err)
	}
	b, _ := os.ReadFile(got)
	if bytes.Contains(b, []byte("s3cret")) {
		t.Errorf("the stranger got the open's environment or line: %q", b)
	}
}
