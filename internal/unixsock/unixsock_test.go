package unixsock

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A socket in a directory deeper than Max binds, takes a connection by
// its long path, and leaves neither its short name nor (after Close) its
// file behind; a short path is used as it is.
func TestLongPath(t *testing.T) {
	for _, depth := range []int{1, 12} {
		dir := filepath.Join(t.TempDir(), strings.Repeat("deep-directory/", depth))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "offload.sock")
		if depth > 1 && len(p) <= Max {
			t.Fatalf("the test's path %s is not longer than %d", p, Max)
		}
		before, _ := filepath.Glob("/tmp/cbsock-*")
		lis, err := Listen(p)
		if err != nil {
			t.Fatalf("Listen(%d bytes): %v", len(p), err)
		}
		go func() {
			c, err := lis.Accept()
			if err == nil {
				c.Write([]byte("hello"))
				c.Close()
			}
		}()
		c, err := Dial(p)
		if err != nil {
			t.Fatalf("Dial(%d bytes): %v", len(p), err)
		}
		b, _ := io.ReadAll(c)
		c.Close()
		if string(b) != "hello" {
			t.Errorf("read %q", b)
		}
		if fi, err := os.Lstat(p); err != nil || fi.Mode()&os.ModeSocket == 0 {
			t.Errorf("no socket at %s: %v", p, err)
		}
		after, _ := filepath.Glob("/tmp/cbsock-*")
		if len(after) > len(before) {
			t.Errorf("short names left behind: %v", after)
		}
		lis.Close()
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("the socket file stays after Close: %v", err)
		}
	}
}
