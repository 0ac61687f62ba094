package shim

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
)

func TestEscapeReader(t *testing.T) {
	tests := []struct {
		name, in, out, msgs string
		quit                bool
	}{
		{name: "plain", in: "ls\r", out: "ls\r"},
		{name: "~~ sends one ~", in: "~~x\r", out: "~x\r"},
		{name: "~ before another byte sends both", in: "~x\r~/y", out: "~x\r~/y"},
		{name: "~ after other input is plain", in: "a~.b", out: "a~.b"},
		{name: "~. at the start disconnects", in: "~.more", out: "", quit: true},
		{name: "~. after a CR disconnects", in: "a\r~.more", out: "a\r", quit: true},
		{name: "~. after a LF disconnects", in: "a\n~.", out: "a\n", quit: true},
		{name: "~~ then . is not an escape", in: "~~.", out: "~."},
		{name: "~? lists the escapes, and another escape may follow", in: "~?~.", msgs: "~?\r\nSupported escape sequences:\r\n", quit: true},
		{name: "a trailing ~ is held", in: "a\r~", out: "a\r"},
	}
	for _, tt := range tests {
		// One byte at a time too, so that an escape split across reads works.
		for _, oneByte := range []bool{false, true} {
			var in io.Reader = strings.NewReader(tt.in)
			if oneByte {
				in = iotest.OneByteReader(in)
			}
			var msgs bytes.Buffer
			quit := false
			e := &escapeReader{r: in, esc: '~', msgs: &msgs, lineStart: true, quit: func() { quit = true }}
			out, err := io.ReadAll(e)
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			if string(out) != tt.out || quit != tt.quit || !strings.HasPrefix(msgs.String(), tt.msgs) {
				t.Errorf("%s (one byte at a time: %v): out %q, quit %v, messages %q; want %q, %v, %q", tt.name, oneByte, out, quit, msgs.String(), tt.out, tt.quit, tt.msgs)
			}
		}
	}
}

func TestEscapeReaderOtherChar(t *testing.T) {
	e := &escapeReader{r: strings.NewReader("\x1d.x\r\x1d."), esc: 0x1d, msgs: io.Discard, lineStart: true, quit: func() {}}
	out, _ := io.ReadAll(e)
	if string(out) != "" {
		t.Errorf("with -e ^] the escape is ^], got %q", out)
	}
}

func TestCRLFWriter(t *testing.T) {
	var b bytes.Buffer
	if n, err := (crlfWriter{&b}).Write([]byte("a\nb\n")); n != 4 || err != nil {
		t.Errorf("Write = %d, %v", n, err)
	}
	if b.String() != "a\r\nb\r\n" {
		t.Errorf("got %q", b.String())
	}
}

func TestTerminfo(t *testing.T) {
	dir := t.TempDir()
	entry := append([]byte{0x1e, 0x02}, bytes.Repeat([]byte{1}, 30)...)
	put := func(p string, b []byte) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put(filepath.Join(dir, "ti", "m", "my-term"), entry)
	put(filepath.Join(dir, "home", ".terminfo", "68", "hex-term"), entry)
	put(filepath.Join(dir, "ti", "b", "bad-magic"), bytes.Repeat([]byte{7}, 40))
	env := map[string]string{"TERMINFO": filepath.Join(dir, "ti"), "HOME": filepath.Join(dir, "home")}
	getenv := func(k string) string { return env[k] }
	if got := terminfo("my-term", getenv); !bytes.Equal(got, entry) {
		t.Errorf("terminfo(my-term) = %q, want the entry in $TERMINFO", got)
	}
	if got := terminfo("hex-term", getenv); !bytes.Equal(got, entry) {
		t.Errorf("terminfo(hex-term) = %q, want the entry under ~/.terminfo/68", got)
	}
	for _, name := range []string{"bad-magic", "no-such-term", "../ti/m/my-term", "", "a/b"} {
		if got := terminfo(name, getenv); got != nil {
			t.Errorf("terminfo(%q) = %q, want nil", name, got)
		}
	}
}

// TestSubsystemSFTP runs the command -s main sftp sends, with a real sh:
// it starts the first sftp-server it finds, and without one says so in
// one line and exits 255.
func TestSubsystemSFTP(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "sftp-server")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho fake sftp-server\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	line, err := subsystemLine("sftp", "cocoonbox-ssh", []string{filepath.Join(dir, "missing"), fake})
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("/bin/sh", "-c", line).Output()
	if err != nil || string(out) != "fake sftp-server\n" {
		t.Errorf("found server: %q, %v", out, err)
	}

	line, err = subsystemLine("sftp", "cocoonbox-ssh", []string{filepath.Join(dir, "missing")})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", line)
	cmd.Env = []string{"PATH=" + dir + "/nowhere"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != 255 {
		t.Errorf("no server: exit status %d, want 255", code)
	}
	if msg := stderr.String(); strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "cocoonbox-ssh: subsystem sftp: the box has no sftp-server") {
		t.Errorf("no server: stderr %q, want one line", msg)
	}

	if _, err := subsystemLine("netconf", "cocoonbox-ssh", sftpServers); err == nil {
		t.Error("subsystem netconf: no error")
	}
}
