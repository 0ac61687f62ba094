//go:build unix

package offload

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/creack/pty"
)

// A Ctrl-C at the terminal while back writes the box's files does not cut
// the update short: it finishes, and back's context still sees the
// interrupt. Back runs in a helper process on a terminal of its own; a
// smudge filter holds the update until the Ctrl-C has come.
func TestBackCtrlC(t *testing.T) {
	env := testEnv(t)
	r := newRepo(t, env, map[string]string{"a.txt": "a\n"})
	dir := t.TempDir()
	ready, release := filepath.Join(dir, "ready"), filepath.Join(dir, "release")
	for _, p := range []string{ready, release} {
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeFiles(t, r.GitDir, map[string]string{"info/attributes": "*.bin filter=wait\n"})
	run(t, r.Top, env, "git", "config", "filter.wait.clean", "cat")
	run(t, r.Top, env, "git", "config", "filter.wait.smudge", fmt.Sprintf("echo go >'%s'; read x <'%s'; cat", ready, release))
	run(t, r.Top, env, "git", "config", "filter.wait.required", "true")
	s, br := offloadTo(t, env, r)
	boxCommit(t, env, br, map[string]string{"a.txt": "a from the box\n", "z.bin": "binary\n"}, "box: a, z.bin")
	boxHead := run(t, br.Top, env, "git", "rev-parse", "HEAD")
	boxBack(t, env, r, br)

	cmd := exec.Command(os.Args[0], "-test.run=^TestBackCtrlCHelper$")
	cmd.Env = append(env, "COCOONBOX_TEST_BACK_REPO="+r.Top, "COCOONBOX_TEST_BACK_BASE="+s)
	tty, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(tty)
		for sc.Scan() {
			lines <- strings.TrimRight(sc.Text(), "\r")
		}
		close(lines)
	}()
	var out []string
	// waitFor reads the helper's output up to a line with s; false when it
	// ended first.
	waitFor := func(s string) bool {
		for l := range lines {
			out = append(out, l)
			if strings.Contains(l, s) {
				return true
			}
		}
		return false
	}
	started := make(chan error, 1)
	go func() { _, err := os.ReadFile(ready); started <- err }()
	for waiting := true; waiting; {
		select {
		case err := <-started:
			if err != nil {
				t.Fatal(err)
			}
			waiting = false
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("back ended before it wrote the files:\n%s", strings.Join(out, "\n"))
			}
			out = append(out, l)
		}
	}
	rel, err := os.OpenFile(release, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rel.Close()
	if _, err := tty.Write([]byte{3}); err != nil { // ^C
		t.Fatal(err)
	}
	// Once back has seen the SIGINT, every process of its group has.
	if !waitFor("interrupted") {
		t.Fatalf("back did not see the Ctrl-C:\n%s", strings.Join(out, "\n"))
	}
	rel.WriteString("x\n")
	waitFor("\x00never")
	cmd.Wait()
	text := strings.Join(out, "\n")
	if !strings.Contains(text, "interrupted") || !strings.Contains(text, "outcome fast-forward <nil>") {
		t.Errorf("back's output:\n%s", text)
	}
	if got := run(t, r.Top, env, "git", "rev-parse", "HEAD"); got != boxHead {
		t.Errorf("HEAD is %s, want the box's %s", got, boxHead)
	}
	got := files(t, r.Top)
	if got["a.txt"] != "-rw-r--r-- a from the box\n" || got["z.bin"] != "-rw-r--r-- binary\n" {
		t.Errorf("a.txt %q, z.bin %q: want the box's", got["a.txt"], got["z.bin"])
	}
}

// TestBackCtrlCHelper is TestBackCtrlC's back, run only by it.
func TestBackCtrlCHelper(t *testing.T) {
	top := os.Getenv("COCOONBOX_TEST_BACK_REPO")
	if top == "" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	go func() { <-ctx.Done(); fmt.Println("interrupted") }()
	r, err := OpenRepo(context.Background(), top, os.Environ())
	if err != nil {
		t.Fatal(err)
	}
	m, err := r.mergeBack(ctx, testID, os.Getenv("COCOONBOX_TEST_BACK_BASE"), RefBack+testID, backTime)
	if m != nil {
		fmt.Printf("outcome %s %v\n", m.Outcome, err)
	} else {
		fmt.Printf("outcome none %v\n", err)
	}
}
