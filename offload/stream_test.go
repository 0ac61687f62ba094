package offload

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteStreamSystemTar writes a stream with a pax long path and a
// file read straight from disk, and checks it with the system tar.
func TestWriteStreamSystemTar(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("s3cr3t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	long := "secrets/file:" + strings.Repeat("deep/", 30) + ".env"
	members := []Member{
		{Name: "handover.md", Data: validHandover("make", "none")},
		{Name: "env.json", Data: []byte(`{"v":1}`)},
		{Name: long, Path: secret},
	}
	var buf bytes.Buffer
	if err := WriteStream(&buf, members); err != nil {
		t.Fatal(err)
	}
	list := exec.Command("tar", "-tf", "-")
	list.Stdin = bytes.NewReader(buf.Bytes())
	out, err := list.Output()
	if err != nil {
		t.Fatalf("tar -t: %v", err)
	}
	if got, want := string(out), "handover.md\nenv.json\n"+long+"\n"; got != want {
		t.Errorf("tar lists\n%s\nwant\n%s", got, want)
	}
	dest := t.TempDir()
	x := exec.Command("tar", "-xf", "-", "-C", dest)
	x.Stdin = bytes.NewReader(buf.Bytes())
	if out, err := x.CombinedOutput(); err != nil {
		t.Fatalf("tar -x: %v\n%s", err, out)
	}
	if got := readFile(t, filepath.Join(dest, filepath.FromSlash(long))); got != "s3cr3t\n" {
		t.Errorf("the long member holds %q", got)
	}
	if got := readFile(t, filepath.Join(dest, "handover.md")); got != string(members[0].Data) {
		t.Errorf("handover.md differs")
	}
}

func TestWriteStreamRefuses(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	os.WriteFile(target, []byte("x"), 0o600)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := mkfifo(fifo); err != nil {
		t.Fatal(err)
	}
	for _, m := range []Member{
		{Name: "secrets/file:x", Path: link},
		{Name: "secrets/file:x", Path: fifo},
		{Name: "secrets/file:x", Path: dir},
		{Name: "../x", Data: []byte("x")},
		{Name: "/x", Data: []byte("x")},
		{Name: "a/../b", Data: []byte("x")},
	} {
		var buf bytes.Buffer
		if err := WriteStream(&buf, []Member{m}); err == nil {
			t.Errorf("%+v: written, want an error", m)
		}
	}
}
