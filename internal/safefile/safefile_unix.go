//go:build unix

package safefile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/internal/atomicfile"
)

// NoFollow is the open flag that makes an open fail (ELOOP) on a
// symbolic link as the path's last component: O_NOFOLLOW.
const NoFollow = unix.O_NOFOLLOW

// nonBlock opens a FIFO without waiting for its writer, and a terminal
// without making it ours.
const nonBlock = unix.O_NONBLOCK | unix.O_NOCTTY

// guard is the one user whose links are followed when links are checked:
// root, when root runs us (a user's own links are theirs to follow); -1
// checks none. Tests set it.
var guard = func() int {
	if os.Geteuid() == 0 {
		return 0
	}
	return -1
}()

// maxHops bounds the links followed, as the kernel's ELOOP does.
const maxHops = 40

const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// sys is the file's directory, held open from Open to Close; dir is -1
// while the directory does not exist.
type sys struct {
	dir  int
	real string // the directory's path, links resolved
	name string // the file's name in it
}

func (f *File) open(large bool) error {
	f.dir = -1
	// A link swapped in between the look and the open is looked up again.
	for range 3 {
		w, err := lookup(f.given, false)
		if err != nil {
			return err
		}
		f.dir, f.real, f.name, f.Linked = w.fd, w.real, w.name, w.linked
		if f.Linked {
			f.Path = filepath.Join(w.real, w.name)
		}
		if w.fd < 0 || w.missing {
			return nil
		}
		if w.mode&unix.S_IFMT != unix.S_IFREG {
			// Not opened at all: an open can block (a FIFO), fail (a
			// socket) or do something (a tape device).
			return &NotRegularError{Path: f.Path, Mode: fileMode(w.mode)}
		}
		fd, err := unix.Openat(w.fd, w.name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ELOOP) {
			unix.Close(f.dir)
			f.dir = -1
			continue
		}
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		if err != nil {
			return &fs.PathError{Op: "open", Path: f.Path, Err: err}
		}
		// O_NONBLOCK stays on anything swapped in since the look (a FIFO),
		// which read refuses without reading.
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
			unix.SetNonblock(fd, false)
		}
		h := os.NewFile(uintptr(fd), f.Path)
		return f.take(h, large)
	}
	return &fs.PathError{Op: "open", Path: f.given, Err: unix.ELOOP}
}

func (f *File) replace(r io.Reader, perm fs.FileMode, prepare func(*os.File) error) error {
	if f.dir < 0 {
		w, err := lookup(f.given, true)
		if err != nil {
			return err
		}
		f.dir, f.real, f.name = w.fd, w.real, w.name
	}
	var tmp string
	var fd int
	for {
		var b [6]byte
		rand.Read(b[:])
		tmp = "." + f.name + ".tmp" + hex.EncodeToString(b[:])
		var err error
		fd, err = unix.Openat(f.dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EEXIST) {
			return &fs.PathError{Op: "create", Path: filepath.Join(f.real, tmp), Err: err}
		}
	}
	if err := atomicfile.Fill(os.NewFile(uintptr(fd), filepath.Join(f.real, tmp)), r, perm, prepare); err != nil {
		unix.Unlinkat(f.dir, tmp, 0)
		return err
	}
	if err := unix.Renameat(f.dir, tmp, f.dir, f.name); err != nil {
		unix.Unlinkat(f.dir, tmp, 0)
		return &fs.PathError{Op: "replace", Path: f.Path, Err: err}
	}
	return nil
}

func (f *File) remove() error {
	if f.dir < 0 {
		return &fs.PathError{Op: "remove", Path: f.Path, Err: fs.ErrNotExist}
	}
	if err := unix.Unlinkat(f.dir, f.name, 0); err != nil {
		return &fs.PathError{Op: "remove", Path: f.Path, Err: err}
	}
	return nil
}

func (f *File) close() error {
	if f.dir < 0 {
		return nil
	}
	err := unix.Close(f.dir)
	f.dir = -1
	return err
}

// walk is where lookup got to.
type walk struct {
	fd      int    // the directory holding the last element; -1 when it does not exist
	real    string // its path, links resolved
	name    string // the last element
	mode    uint32 // the last element's mode (its lstat's)
	missing bool   // the last element does not exist
	linked  bool   // the last element was reached through a link
}

// lookup walks path from / one element at a time, each opened without
// following a link, and follows a link itself only when guard allows
// it; it returns the directory holding the last element, open. With
// create, a missing directory on the way is made 0700; without, w.fd is
// -1 then.
func lookup(path string, create bool) (w walk, err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return walk{fd: -1}, err
	}
	w.fd, w.real = -1, "/"
	defer func() {
		if err != nil && w.fd >= 0 {
			unix.Close(w.fd)
			w.fd = -1
		}
	}()
	if w.fd, err = unix.Open("/", dirFlags, 0); err != nil {
		return w, &fs.PathError{Op: "open", Path: "/", Err: err}
	}
	todo := elements(abs)
	if len(todo) == 0 {
		return w, &NotRegularError{Path: path, Mode: fs.ModeDir}
	}
	hops := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		last := len(todo) == 0
		if c == ".." {
			if last {
				return w, &NotRegularError{Path: path, Mode: fs.ModeDir}
			}
			if err := w.cd(".."); err != nil {
				return w, err
			}
			continue
		}
		p := filepath.Join(w.real, c)
		var st unix.Stat_t
		err := unix.Fstatat(w.fd, c, &st, unix.AT_SYMLINK_NOFOLLOW)
		switch {
		case errors.Is(err, unix.ENOENT) && last:
			w.name, w.missing = c, true
			return w, nil
		case errors.Is(err, unix.ENOENT) && !create:
			rest := append([]string{c}, todo...)
			unix.Close(w.fd)
			w.fd, w.missing = -1, true
			w.real = filepath.Join(append([]string{w.real}, rest[:len(rest)-1]...)...)
			w.name = rest[len(rest)-1]
			return w, nil
		case errors.Is(err, unix.ENOENT):
			if err := unix.Mkdirat(w.fd, c, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
				return w, &fs.PathError{Op: "mkdir", Path: p, Err: err}
			}
			todo = append([]string{c}, todo...)
			continue
		case err != nil:
			return w, &fs.PathError{Op: "lstat", Path: p, Err: err}
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			if hops++; hops > maxHops {
				return w, &fs.PathError{Op: "open", Path: path, Err: unix.ELOOP}
			}
			if err := w.mayFollow(p, &st); err != nil {
				return w, err
			}
			target, err := readlinkat(w.fd, c)
			if err != nil {
				return w, &fs.PathError{Op: "readlink", Path: p, Err: err}
			}
			w.linked = w.linked || last
			if filepath.IsAbs(target) {
				unix.Close(w.fd)
				w.fd = -1
				if w.fd, err = unix.Open("/", dirFlags, 0); err != nil {
					return w, &fs.PathError{Op: "open", Path: "/", Err: err}
				}
				w.real = "/"
			}
			rest := elements(target)
			if len(rest) == 0 {
				return w, &NotRegularError{Path: p, Mode: fs.ModeDir}
			}
			todo = append(rest, todo...)
			continue
		}
		if last {
			w.name, w.mode = c, uint32(st.Mode)
			return w, nil
		}
		if err := w.cd(c); errors.Is(err, unix.ELOOP) {
			// It became a link since the look: look again.
			todo = append([]string{c}, todo...)
			hops++
			continue
		} else if err != nil {
			return w, err
		}
	}
	panic("unreachable")
}

// cd moves w into its directory's element c.
func (w *walk) cd(c string) error {
	fd, err := unix.Openat(w.fd, c, dirFlags, 0)
	if errors.Is(err, unix.ELOOP) {
		return err
	}
	if err != nil {
		return &fs.PathError{Op: "open", Path: filepath.Join(w.real, c), Err: err}
	}
	unix.Close(w.fd)
	w.fd = fd
	if c == ".." {
		w.real = filepath.Dir(w.real)
	} else {
		w.real = filepath.Join(w.real, c)
	}
	return nil
}

// mayFollow refuses the link p (its lstat st) in w's directory unless
// guard owns both, and no one else may write the directory (unless it
// is sticky, as /tmp: then only the link's owner can replace it).
func (w *walk) mayFollow(p string, st *unix.Stat_t) error {
	if guard < 0 {
		return nil
	}
	if int(st.Uid) != guard {
		return &LinkError{Path: p, UID: int(st.Uid)}
	}
	var dst unix.Stat_t
	if err := unix.Fstat(w.fd, &dst); err != nil {
		return &fs.PathError{Op: "stat", Path: w.real, Err: err}
	}
	if int(dst.Uid) != guard {
		return &LinkError{Path: p, UID: int(dst.Uid), Dir: true}
	}
	if dst.Mode&0o022 != 0 && dst.Mode&unix.S_ISVTX == 0 {
		return &LinkError{Path: p, UID: -1, Dir: true}
	}
	return nil
}

// elements are p's names between slashes, without empty ones and ".".
func elements(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

func readlinkat(dir int, name string) (string, error) {
	for n := 256; ; n *= 2 {
		b := make([]byte, n)
		m, err := unix.Readlinkat(dir, name, b)
		if err != nil {
			return "", err
		}
		if m < n {
			return string(b[:m]), nil
		}
	}
}

// fileMode is the fs.FileMode of a stat's mode.
func fileMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	}
	return mode
}
