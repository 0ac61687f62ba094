package remote

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/localbox"
)

// testBox serves a real local box on a unix socket in a temporary
// directory and returns a client for it and box main's workspace.
func testBox(t testing.TB) (*box.Client, string) {
	t.Helper()
	dir := t.TempDir()
	srv := &localbox.Server{Dir: dir}
	// CreateBox makes the server's state now, not in Serve's goroutine.
	if err := srv.CreateBox(localbox.DefaultBox); err != nil {
		t.Fatal(err)
	}
	lis, url, err := localbox.Listen(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := localbox.IssueToken(dir, "test", "remote")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	ep, err := box.ParseEndpoint(url)
	if err != nil {
		t.Fatal(err)
	}
	c, err := box.Dial(ep, tok)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, filepath.Join(dir, "boxes", localbox.DefaultBox, "workspace")
}

func git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=T", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=T", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

// run feeds in to a Helper for url and returns what it wrote to stdout and
// stderr, and its error.
func run(t *testing.T, h *Helper, in string) (string, string, error) {
	t.Helper()
	var out, stderr bytes.Buffer
	if h.Stderr == nil {
		h.Stderr = &stderr
	}
	err := h.Run(context.Background(), strings.NewReader(in), &out)
	return out.String(), stderr.String(), err
}

func noDial() (Execer, error) { return nil, errors.New("dialled") }

func TestCapabilitiesAndOptions(t *testing.T) {
	h := &Helper{URL: "main/app", Dial: noDial}
	in := "capabilities\n" +
		"option progress true\n" +
		"option verbosity 2\n" +
		"option followtags true\n" +
		"option servpath \"git \\\"upload\\\"-pack\"\n" +
		"option verbosity many\n" +
		"option progress maybe\n" +
		"\n" +
		"capabilities\n" // after the blank line: never read
	out, _, err := run(t, h, in)
	if err != nil {
		t.Fatal(err)
	}
	want := "connect\noption\n\n" +
		"ok\nok\nunsupported\nok\n" +
		"error verbosity is not a number\nerror progress is true or false\n"
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("answers (-want +got):\n%s", diff)
	}
	if !h.progress || h.verbosity != 2 || h.servpath != `git "upload"-pack` {
		t.Errorf("options: progress %v, verbosity %d, servpath %q", h.progress, h.verbosity, h.servpath)
	}
	// EOF with no blank line ends the conversation too.
	if out, _, err := run(t, &Helper{URL: "main/app", Dial: noDial}, "capabilities\n"); err != nil || out != "connect\noption\n\n" {
		t.Errorf("EOF: %q, %v", out, err)
	}
}

// Failures before the blank line leave git nothing but EOF: no fallback.
func TestConnectRefusals(t *testing.T) {
	tests := []struct {
		url, in, err string
	}{
		{"main/app", "list\n", `git sent "list"`},
		{"main/app", "connect git-frob\n", `git asked to connect to "git-frob"`},
		{"main", "connect git-upload-pack\n", `bad URL "cocoonbox::main"`},
		{"main/app", "connect git-upload-pack\n", "dialled"},
	}
	for _, tt := range tests {
		out, _, err := run(t, &Helper{URL: tt.url, Dial: noDial}, "capabilities\n"+tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%q: error %v, want %q", tt.in, err, tt.err)
		}
		if out != "connect\noption\n\n" {
			t.Errorf("%q: wrote %q after the capabilities", tt.in, out)
		}
	}
	h := &Helper{URL: "main/app", Dial: noDial, ProtocolVersion: func() (int, error) { return 0, errors.New("bad version") }}
	if _, _, err := run(t, h, "connect git-upload-pack\n"); err == nil || err.Error() != "bad version" {
		t.Errorf("ProtocolVersion's error: %v", err)
	}
}

func TestProtocolEnv(t *testing.T) {
	tests := []struct {
		version int
		service string
		want    map[string]string
	}{
		{2, UploadPack, map[string]string{"GIT_PROTOCOL": "version=2"}},
		{2, ReceivePack, nil},
		{2, UploadArchive, nil},
		{1, UploadPack, map[string]string{"GIT_PROTOCOL": "version=1"}},
		{1, ReceivePack, map[string]string{"GIT_PROTOCOL": "version=1"}},
		{1, UploadArchive, map[string]string{"GIT_PROTOCOL": "version=1"}},
		{0, UploadPack, nil},
		{0, ReceivePack, nil},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, protocolEnv(tt.version, tt.service)); diff != "" {
			t.Errorf("protocolEnv(%d, %s) (-want +got):\n%s", tt.version, tt.service, diff)
		}
	}
}

// A recorded exchange with git-upload-pack in a real box matches, byte for
// byte, what the same git-upload-pack says run here directly.
func TestConnectUploadPack(t *testing.T) {
	c, ws := testBox(t)
	git(t, ws, "init", "-q", "--bare", "-b", "main", "app.git")
	src := t.TempDir()
	git(t, src, "init", "-q", "-b", "main")
	git(t, src, "commit", "-q", "--allow-empty", "-m", "one")
	git(t, src, "push", "-q", filepath.Join(ws, "app.git"), "main")

	for _, version := range []int{0, 2} {
		direct := exec.Command("git-upload-pack", "app.git")
		direct.Dir = ws
		direct.Stdin = strings.NewReader("0000")
		if version == 2 {
			direct.Env = append(os.Environ(), "GIT_PROTOCOL=version=2")
		}
		want, err := direct.Output()
		if err != nil {
			t.Fatal(err)
		}
		h := &Helper{
			URL:             "main/app.git",
			Dial:            func() (Execer, error) { return c, nil },
			ProtocolVersion: func() (int, error) { return version, nil },
		}
		out, stderr, err := run(t, h, "capabilities\noption progress false\nconnect git-upload-pack\n0000")
		if err != nil {
			t.Fatalf("v%d: %v (stderr %q)", version, err, stderr)
		}
		if diff := cmp.Diff("connect\noption\n\nok\n\n"+string(want), out); diff != "" {
			t.Errorf("v%d (-want +got):\n%s", version, diff)
		}
		if v2 := strings.HasPrefix(string(want), "000eversion 2\n"); v2 != (version == 2) {
			t.Errorf("v%d: the service answered %q", version, want[:14])
		}
	}
}

// The service's stdin ends when git's does, its output is relayed until it
// exits, and its status comes back.
func TestConnectSplice(t *testing.T) {
	c, _ := testBox(t)
	tests := []struct {
		servpath string
		in       string
		out      string
		status   box.ExitStatus
	}{
		{"wc -c; true", "hello", "5\n", box.ExitStatus{}},
		{"cat; echo end; true", "a\x00b\n", "a\x00b\nend\n", box.ExitStatus{}},
		{"exit 42; true", "", "", box.ExitStatus{Code: 42}},
		{"no-such-command-here", "", "", box.ExitStatus{Code: 127}},
		{"kill -9 $$; true", "", "", box.ExitStatus{Signal: "KILL"}},
	}
	for _, tt := range tests {
		h := &Helper{URL: "main/app", Dial: func() (Execer, error) { return c, nil }}
		in := "capabilities\noption servpath " + tt.servpath + "\nconnect git-receive-pack\n" + tt.in
		out, _, err := run(t, h, in)
		want := "connect\noption\n\nok\n\n" + tt.out
		if out != want {
			t.Errorf("%s: out %q, want %q", tt.servpath, out, want)
		}
		var ee *ExitError
		switch {
		case tt.status == box.ExitStatus{}:
			if err != nil {
				t.Errorf("%s: %v", tt.servpath, err)
			}
		case !errors.As(err, &ee):
			t.Errorf("%s: error %v, want an *ExitError", tt.servpath, err)
		case ee.Status != tt.status || ee.Init != "":
			t.Errorf("%s: %+v, want status %+v", tt.servpath, ee, tt.status)
		}
	}
}

func TestConnectMissingRepository(t *testing.T) {
	c, _ := testBox(t)
	for _, service := range []string{UploadPack, ReceivePack, UploadArchive} {
		h := &Helper{URL: "main:~/my repo", Dial: func() (Execer, error) { return c, nil }}
		in := "capabilities\nconnect " + service + "\n"
		if service == UploadArchive {
			in += "0012argument main\n0000"
		}
		_, stderr, err := run(t, h, in)
		var ee *ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("%s: error %v, want an *ExitError", service, err)
		}
		want := `cocoonbox rsh main git init --bare -b main "~/'my repo'"`
		if ee.Status.Code == 0 || ee.Init != want {
			t.Errorf("%s: %+v, want a failure with Init %q", service, ee, want)
		}
		if service != UploadArchive && !strings.Contains(stderr, "fatal: '~/my repo' does not appear to be a git repository") {
			t.Errorf("%s: stderr %q", service, stderr)
		}
	}
}

// A sleeping box is woken; its progress shows only when git asks for it.
func TestConnectWakes(t *testing.T) {
	c, _ := testBox(t)
	for _, progress := range []string{"false", "true"} {
		if _, err := c.Hibernate(context.Background(), "main"); err != nil {
			t.Fatal(err)
		}
		h := &Helper{URL: "main/app", Dial: func() (Execer, error) { return c, nil }}
		in := "capabilities\noption progress " + progress + "\noption servpath echo\nconnect git-upload-pack\n"
		out, stderr, err := run(t, h, in)
		if err != nil {
			t.Fatal(err)
		}
		if out != "connect\noption\n\nok\nok\n\napp\n" {
			t.Errorf("progress %s: out %q", progress, out)
		}
		if woke := strings.Contains(stderr, "box main: waking"); woke != (progress == "true") {
			t.Errorf("progress %s: stderr %q", progress, stderr)
		}
	}
}

// BenchmarkSplice measures the helper's relay through a real local box:
// 64 MiB from the service to git, and 64 MiB from git to the service.
func BenchmarkSplice(b *testing.B) {
	c, _ := testBox(b)
	const size = 64 << 20
	data := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	for _, bc := range []struct {
		name, servpath string
		in             []byte
	}{
		{"down", "head -c 67108864 /dev/zero; true", nil},
		{"up", "cat >/dev/null; true", data},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				h := &Helper{URL: "main/app", Dial: func() (Execer, error) { return c, nil }, Stderr: io.Discard}
				in := io.MultiReader(strings.NewReader("capabilities\noption servpath "+bc.servpath+"\nconnect git-upload-pack\n"), bytes.NewReader(bc.in))
				if err := h.Run(context.Background(), in, io.Discard); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// failAfter accepts n bytes, then fails as a closed pipe does.
type failAfter struct{ n int }

func (w *failAfter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		return 0, errors.New("broken pipe")
	}
	w.n -= len(p)
	return len(p), nil
}

// When git stops reading, the call ends with a *box.WriteError for the
// caller to exit on quietly, and the service does not run on.
func TestConnectGitGone(t *testing.T) {
	c, _ := testBox(t)
	answers := len("connect\noption\n\nok\n")
	for _, n := range []int{answers, answers + 1} {
		h := &Helper{URL: "main/app", Dial: func() (Execer, error) { return c, nil }}
		in := "capabilities\noption servpath yes; true\nconnect git-upload-pack\n"
		err := h.Run(context.Background(), strings.NewReader(in), &failAfter{n})
		var we *box.WriteError
		if !errors.As(err, &we) {
			t.Errorf("stdout closed after %d bytes: error %v, want a *box.WriteError", n, err)
		}
	}
}
