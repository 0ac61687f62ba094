//go:build unix

package safefile

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// openWithin is Open that fails the test instead of hanging: a FIFO's
// open blocks until a writer comes.
func openWithin(t *testing.T, path string) (*File, error) {
	t.Helper()
	type result struct {
		f   *File
		err error
	}
	done := make(chan result, 1)
	go func() {
		f, err := Open(path)
		done <- result{f, err}
	}()
	select {
	case r := <-done:
		if r.f != nil {
			t.Cleanup(func() { r.f.Close() })
		}
		return r.f, r.err
	case <-time.After(10 * time.Second):
		t.Fatalf("Open(%s) still blocked after 10 s", path)
		return nil, nil
	}
}

func TestOpenRefusesNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	link := filepath.Join(dir, "link-to-fifo")
	if err := os.Symlink(fifo, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, kind string
	}{
		{fifo, "a named pipe (FIFO)"},
		{link, "a named pipe (FIFO)"},
		{sock, "a socket"},
		{dir, "a directory"},
		{dir + "/", "a directory"},
		{"/dev/zero", "a character device"},
		{"/", "a directory"},
	} {
		_, err := openWithin(t, tc.path)
		e, ok := errors.AsType[*NotRegularError](err)
		if !ok {
			t.Errorf("Open(%s): %v, want a NotRegularError", tc.path, err)
			continue
		}
		if e.Kind() != tc.kind {
			t.Errorf("Open(%s): %q, want %s", tc.path, e, tc.kind)
		}
	}
}

func TestOpenBounded(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	// Sparse: MaxSize+1 bytes cost no disk.
	if err := f.Truncate(MaxSize + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := Open(p); !isType[*TooLargeError](err) {
		t.Errorf("Open of MaxSize+1 bytes: %v, want a TooLargeError", err)
	}
	if err := os.Truncate(p, MaxSize); err != nil {
		t.Fatal(err)
	}
	got, err := Open(p)
	if err != nil {
		t.Fatalf("Open of MaxSize bytes: %v", err)
	}
	got.Close()
	if len(got.Data) != MaxSize {
		t.Errorf("read %d bytes, want %d", len(got.Data), MaxSize)
	}
}

func isType[E error](err error) bool {
	_, ok := errors.AsType[E](err)
	return ok
}

func TestOpenMissingAndReplace(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a", "b", "config")
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Info != nil || f.Data != nil || f.Linked {
		t.Fatalf("Open of a missing file: %+v", f)
	}
	if _, _, err := ReadFile(p); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile of a missing file: %v, want fs.ErrNotExist", err)
	}
	if err := f.Replace([]byte("new\n"), 0o640, nil); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(dir, "a"), filepath.Join(dir, "a", "b")} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v, want a 0700 directory", d, fi.Mode(), err)
		}
	}
	b, fi, err := ReadFile(p)
	if err != nil || string(b) != "new\n" || fi.Mode().Perm() != 0o640 {
		t.Errorf("after Replace: %q %v %v", b, fi.Mode(), err)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "a", "b")); len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
}

// TestReplaceHoldsDirectory: the directory read is the one written, even
// when its path leads elsewhere by the time of the write.
func TestReplaceHoldsDirectory(t *testing.T) {
	dir := t.TempDir()
	mine := filepath.Join(dir, "ssh")
	elsewhere := filepath.Join(dir, "elsewhere")
	for _, d := range []string{mine, elsewhere} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "config"), []byte("old\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f, err := Open(filepath.Join(mine, "config"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.Rename(mine, mine+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, mine); err != nil {
		t.Fatal(err)
	}
	if err := f.Replace([]byte("new\n"), 0o600, nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(elsewhere, "config")); string(b) != "old\n" {
		t.Errorf("the link's target was written: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(mine+".moved", "config")); string(b) != "new\n" {
		t.Errorf("the directory read was not written: %q", b)
	}
}

func TestOpenFollowsLinks(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "dotfiles", "ssh")
	if err := os.MkdirAll(real, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(real, "config"), []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../dotfiles/ssh/config", filepath.Join(dir, "dotfiles", "config")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("dotfiles", filepath.Join(dir, "home")); err != nil {
		t.Fatal(err)
	}
	// The last element a link (whose target climbs out with ..), reached
	// through a directory link.
	f, err := Open(filepath.Join(dir, "home", "config"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want, _ := filepath.EvalSymlinks(filepath.Join(real, "config"))
	if !f.Linked || string(f.Data) != "x\n" || f.Path != want {
		t.Errorf("Open through links: linked %v, %q, path %s; want linked, x, %s", f.Linked, f.Data, f.Path, want)
	}
	if err := f.Replace([]byte("y\n"), 0o600, nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(real, "config")); string(b) != "y\n" {
		t.Errorf("the target holds %q after Replace", b)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "dotfiles", "config")); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("the link is no longer a link: %v %v", fi.Mode(), err)
	}
	// A dangling link: linked, and no file.
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink(filepath.Join(dir, "nowhere", "config"), dangling); err != nil {
		t.Fatal(err)
	}
	g, err := Open(dangling)
	if err != nil || !g.Linked || g.Info != nil {
		t.Fatalf("Open of a dangling link: %+v %v", g, err)
	}
	g.Close()
}

// TestWritableDirLink: a link in a directory that others may write is
// not followed when links are checked, unless the directory is sticky.
func TestWritableDirLink(t *testing.T) {
	defer func(g int) { guard = g }(guard)
	guard = os.Getuid()
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(dir, "shared")
	if err := os.Mkdir(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(shared, "config")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	_, err := Open(link)
	if e, ok := errors.AsType[*LinkError](err); !ok || !e.Dir || e.UID != -1 {
		t.Errorf("Open of a link in a 0777 directory: %v, want a LinkError", err)
	}
	if err := os.Chmod(shared, 0o777|fs.ModeSticky); err != nil {
		t.Fatal(err)
	}
	f, err := Open(link)
	if err != nil {
		t.Fatalf("Open of a link in a sticky directory: %v", err)
	}
	f.Close()
}

// TestRootRefusesOthersLinks: run by root, a link that another user owns,
// or that sits in another user's directory (here or on the way) is not
// followed, and the file it points to is never written.
func TestRootRefusesOthersLinks(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving a link to another user needs root (make test runs as root)")
	}
	const other = 65534
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("root's\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	theirs := filepath.Join(dir, "theirs")
	if err := os.Mkdir(theirs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(theirs, other, other); err != nil {
		t.Fatal(err)
	}
	mine := filepath.Join(dir, "mine")
	if err := os.Mkdir(mine, 0o755); err != nil {
		t.Fatal(err)
	}
	link := func(p, to string, uid int) string {
		t.Helper()
		if err := os.Symlink(to, p); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, path string
		want       LinkError
	}{
		{"their link in their directory", link(filepath.Join(theirs, "config"), secret, other), LinkError{Path: filepath.Join(theirs, "config"), UID: other}},
		{"root's link in their directory", link(filepath.Join(theirs, "rootlink"), secret, 0), LinkError{Path: filepath.Join(theirs, "rootlink"), UID: other, Dir: true}},
		{"their link in root's directory", link(filepath.Join(mine, "config"), secret, other), LinkError{Path: filepath.Join(mine, "config"), UID: other}},
		{"their directory link on the way", filepath.Join(link(filepath.Join(theirs, "ssh"), dir, other), "secret"), LinkError{Path: filepath.Join(theirs, "ssh"), UID: other}},
	} {
		_, err := Open(tc.path)
		e, ok := errors.AsType[*LinkError](err)
		if !ok || *e != tc.want {
			t.Errorf("%s: Open: %v, want %v", tc.name, err, &tc.want)
		}
	}
	if b, _ := os.ReadFile(secret); !bytes.Equal(b, []byte("root's\n")) {
		t.Errorf("the secret changed: %q", b)
	}
	// Root's own links in root's directories are followed.
	f, err := Open(link(filepath.Join(mine, "ok"), secret, 0))
	if err != nil {
		t.Fatalf("root's link: %v", err)
	}
	f.Close()
}

// TestOpenLarge: past MaxSize, OpenLarge checks what Open checks, reads
// nothing, and ReplaceFrom streams the new content in its place.
func TestOpenLarge(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "big")
	big := bytes.Repeat([]byte("0123456789abcde\n"), MaxSize/16+1)
	if err := os.WriteFile(p, big, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(p); !isType[*TooLargeError](err) {
		t.Fatalf("Open: %v, want a TooLargeError", err)
	}
	f, err := OpenLarge(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Data != nil || f.Body == nil || f.Info.Size() != int64(len(big)) {
		t.Fatalf("OpenLarge: data %d bytes, body %v, info %v", len(f.Data), f.Body, f.Info)
	}
	if err := f.ReplaceFrom(io.LimitReader(f.Body, int64(len(big)-16)), 0o640, nil); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, big[:len(big)-16]) {
		t.Errorf("after ReplaceFrom: %d bytes, %v", len(b), err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{fifo, "/dev/zero"} {
		if _, err := OpenLarge(q); !isType[*NotRegularError](err) {
			t.Errorf("OpenLarge(%s): %v, want a NotRegularError", q, err)
		}
	}
}

// TestReadRegular: links are followed to a regular file; a FIFO (which
// an open would wait on) or a device is refused without a read, and a
// file past the bound is refused naming it.
func TestReadRegular(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "rec")
	if err := os.WriteFile(p, []byte("12345"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(p, link); err != nil {
		t.Fatal(err)
	}
	if b, fi, err := ReadRegular(link, 5); err != nil || string(b) != "12345" || fi.Size() != 5 {
		t.Errorf("ReadRegular of 5 bytes at most 5: %q %v", b, err)
	}
	_, _, err := ReadRegular(p, 4)
	if e, ok := errors.AsType[*TooLargeError](err); !ok || e.Error() != p+" is larger than 4 bytes" {
		t.Errorf("ReadRegular of 5 bytes at most 4: %v", err)
	}
	if _, _, err := ReadRegular(filepath.Join(dir, "none"), 4); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadRegular of a missing file: %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{fifo, "/dev/zero"} {
		done := make(chan error, 1)
		go func() {
			_, _, err := ReadRegular(q, MaxSize)
			done <- err
		}()
		select {
		case err := <-done:
			if !isType[*NotRegularError](err) {
				t.Errorf("ReadRegular(%s): %v, want a NotRegularError", q, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("ReadRegular(%s) still blocked after a minute", q)
		}
	}
	if got := (&TooLargeError{Path: "f", Max: 256 << 10}).Error(); got != "f is larger than 256 KiB" {
		t.Errorf("TooLargeError = %q", got)
	}
}
