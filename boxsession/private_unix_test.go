//go:build unix

package boxsession

import (
	"bytes"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A holder.sock in a directory others can write may be a stranger's, who
// would get an open's environment, command line and streams: open,
// attach and list refuse the directory before they connect.
func TestSharedDirNotDialed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sessions")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(dir, "holder.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// A stranger's holder: it takes each connection and hangs up, counted.
	conns := make(chan struct{}, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns <- struct{}{}
			c.Close()
		}
	}()
	calls := map[string]func() error{
		"open": func() error {
			return Open(dir, "/bin/false", nil, "0123", time.Minute, "true", strings.NewReader(""), io.Discard)
		},
		"attach": func() error { return Attach(dir, "/bin/false", nil, "0123", strings.NewReader(""), io.Discard) },
		"list":   func() error { return List(dir, new(bytes.Buffer)) },
	}
	for name, call := range calls {
		if err := call(); err == nil || !strings.Contains(err.Error(), "not a private directory") {
			t.Errorf("%s in a 0777 directory: %v, want not a private directory", name, err)
		}
	}
	l.Close()
	if n := len(conns); n > 0 {
		t.Fatalf("%d clients connected to the holder.sock of a shared directory", n)
	}
}
