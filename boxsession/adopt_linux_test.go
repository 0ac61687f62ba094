package boxsession

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/sessionwire"
	"github.com/cocoonbox/cocoonbox/internal/unixsock"
)

// holderWithRequests serves a holder in run's cocoonbox-sessions with
// the shell's way in, as Run does, for the test.
func holderWithRequests(t *testing.T, run string) {
	t.Helper()
	dir := Dir(func(k string) string {
		if k == "COCOONBOX_RUN_DIR" {
			return run
		}
		return ""
	})
	if err := privateDir(dir); err != nil {
		t.Fatal(err)
	}
	lis, err := unixsock.Listen(filepath.Join(dir, "holder.sock"))
	if err != nil {
		t.Fatal(err)
	}
	h := &Holder{Bound: 64 << 10, Logf: t.Logf}
	h.init(lis)
	stop := h.takeRequests(dir)
	if stop == nil {
		t.Fatal("takeRequests made nothing")
	}
	go h.Serve(lis)
	t.Cleanup(func() {
		lis.Close()
		stop()
	})
}

// shellOpenLine is the client's line for opening session id of line by
// the shell's way in (box's openLine).
func shellOpenLine(t *testing.T, id, line string) string {
	req, err := json.Marshal(sessionwire.ShellRequest{Op: "open", ID: id, Window: int64(time.Minute), Line: line})
	if err != nil || bytes.ContainsRune(req, '\'') {
		t.Fatalf("request %s: %v", req, err)
	}
	return "set -- open " + id + " 1m0s -- '" + line + "'; " + sessionwire.ShellOpen("'"+string(req)+"'")
}

// A box's shell that finds a holder hands it the Exec's streams itself:
// the command runs in the shell's directory with its environment, its
// output and exit come as frames on the shell's own stdout, and the shell
// exits 0 once the attachment ends. No attacher is on the PATH, so
// without the way in the shell fails (127). A shell whose stdin is not a
// pipe is turned away to the attacher.
func TestShellOpen(t *testing.T) {
	run := t.TempDir()
	holderWithRequests(t, run)
	work := t.TempDir()
	env := []string{"COCOONBOX_RUN_DIR=" + run, "PATH=/usr/bin:/bin", "FOO=bar baz"}

	for i, shell := range []string{"/bin/sh", "/bin/bash"} {
		shellTakesOver(t, shell, "sh"+strconv.Itoa(i), env, work)
	}

	// A regular file is no pipe: the shell runs the attacher instead,
	// here none (127).
	file := filepath.Join(work, "stdin")
	os.WriteFile(file, nil, 0o600)
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var stderr bytes.Buffer
	sh := exec.Command("/bin/sh", "-c", shellOpenLine(t, "away", "true"))
	sh.Env, sh.Dir, sh.Stdin, sh.Stderr = append(env, "SHELL=/bin/sh"), work, f, &stderr
	err = sh.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 127 || !strings.Contains(stderr.String(), "cocoonbox-agent") {
		t.Errorf("turned away: %v, %q; want the attacher's exit 127", err, stderr.String())
	}
}

// shellTakesOver runs a session of a line through shell's way in, as a
// box's shell does for an Exec (env, dir work), and checks what comes.
func shellTakesOver(t *testing.T, shell, id string, env []string, work string) {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	sh := exec.Command(shell, "-c", shellOpenLine(t, id, `echo "$FOO"; pwd; cat; exit 3`))
	sh.Env, sh.Dir, sh.Stdin, sh.Stdout, sh.Stderr = append(env, "SHELL="+shell), work, inR, outW, &stderr
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	outW.Close()
	inW.Write(sessionwire.Append(nil, sessionwire.Frame{Type: sessionwire.Data, Stream: sessionwire.Stdin, Data: []byte("in\n")}))
	inW.Write(sessionwire.Append(nil, sessionwire.Frame{Type: sessionwire.EOF, Stream: sessionwire.Stdin, Off: 3}))
	// A guard, not a measure: a shell the holder never served would wait
	// on the gate for ever.
	outR.SetReadDeadline(time.Now().Add(20 * time.Second))
	out := bufio.NewReader(outR)
	var stdout bytes.Buffer
	hello := false
	for {
		f, err := sessionwire.Read(out)
		if err != nil {
			sh.Process.Kill()
			sh.Wait()
			t.Fatalf("%v (stdout so far %q; the shell said %q)", err, stdout.String(), stderr.String())
		}
		if f.Type == sessionwire.Hello {
			hello = true
		}
		if f.Type == sessionwire.Data && f.Stream == sessionwire.Stdout {
			stdout.Write(f.Data)
		}
		if f.Type == sessionwire.Exit {
			if f.Code != 3 {
				t.Errorf("exit %+v, want 3", f)
			}
			break
		}
	}
	if want := "bar baz\n" + work + "\nin\n"; !hello || stdout.String() != want {
		t.Errorf("hello %v, stdout %q; want %q", hello, stdout.String(), want)
	}
	inW.Write(sessionwire.Append(nil, sessionwire.Frame{Type: sessionwire.Bye}))
	if err := sh.Wait(); err != nil {
		t.Errorf("the shell: %v, want exit 0 (it said %q)", err, stderr.String())
	}
	inW.Close()

}
