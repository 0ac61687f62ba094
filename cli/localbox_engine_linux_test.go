package cli_test

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A user the engine's socket refuses (not in the docker group) is told
// that, and how to get in: not to start an engine that runs. The socket
// is a real one this user may not open: root's and 0600 with the test
// run by root (the command then runs as the box user `user`), else the
// test user's own with no permission at all.
func TestEngineRefusesUserNamesFix(t *testing.T) {
	home := shortHome(t)
	sock := filepath.Join(home, "docker.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var cred *syscall.Credential
	mode := os.FileMode(0)
	if os.Geteuid() == 0 {
		cred = boxUserCred(t)
		mode = 0o600
	}
	if err := os.Chmod(sock, mode); err != nil {
		t.Fatal(err)
	}
	c := exec.Command("cocoonbox", "localbox", "image", "build", "--cache", "")
	c.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "DOCKER_HOST=unix://" + sock}
	c.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	out, err := c.CombinedOutput()
	if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != 1 {
		t.Fatalf("image build: %v, want exit 1\n%s", err, out)
	}
	want := "cocoonbox: engine docker refuses this user at unix://" + sock + " (permission denied): run as root, or join the docker group (sudo usermod -aG docker $USER, then log in again), or use rootless podman (--engine podman); or run the local box with --engine process\n"
	if string(out) != want {
		t.Errorf("image build said\n%s\nwant\n%s", out, strings.TrimSpace(want))
	}
}
