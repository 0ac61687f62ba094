// Package safefile reads and replaces a file whose path a user gave, such
// as the ssh_config that `cocoonbox ssh-config` edits: only a regular file
// is read, and never more than MaxSize bytes (a FIFO, a device, a socket
// or a directory is refused before an open could block or a read run on
// forever); and, run by root, no symbolic link that another user controls
// is followed, so that no user can point root's write at a file of
// root's. On unix the file's directory is held open from the read to the
// replace, a temporary file and a rename in it, so that what was checked
// is what is written.
package safefile

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// MaxSize is the most that Open reads of a file: 4 MiB, far beyond any
// ssh_config, known_hosts or key file.
const MaxSize = 4 << 20

// File is a regular file opened by Open, or the place for one.
type File struct {
	// Path is the file's path: as given, or, when the given path's last
	// element is a symbolic link, the file it leads to.
	Path string
	// Linked says the given path's last element is a symbolic link.
	Linked bool
	// Info describes the file as it was read; nil when there is none.
	Info fs.FileInfo
	// Data is what the file held; nil when there is none, and after
	// OpenLarge.
	Data []byte
	// Body is the file itself, open for reading from its start, after
	// OpenLarge; nil when there is none, and after Open.
	Body *os.File

	given string
	sys
}

// Open reads the file at path, which may not exist: then Info and Data
// are nil, and Replace makes it. It fails with a *NotRegularError for
// anything but a regular file, a *TooLargeError past MaxSize and a
// *LinkError for a link root must not follow. Close releases it.
func Open(path string) (*File, error) { return openFile(path, false) }

// OpenLarge is Open for a file of any size: it checks what Open checks
// but MaxSize, and reads nothing, leaving the file open as Body, so that
// a file too large to hold can be streamed through ReplaceFrom.
func OpenLarge(path string) (*File, error) { return openFile(path, true) }

func openFile(path string, large bool) (*File, error) {
	f := &File{Path: path, given: path}
	if err := f.open(large); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ReadFile is Open's data for a file that must exist: its error then
// satisfies errors.Is(err, fs.ErrNotExist), as os.ReadFile's does.
func ReadFile(path string) ([]byte, fs.FileInfo, error) {
	f, err := Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if f.Info == nil {
		return nil, nil, &fs.PathError{Op: "open", Path: f.Path, Err: fs.ErrNotExist}
	}
	return f.Data, f.Info, nil
}

// Replace puts data in the file's place with mode perm: a temporary file
// beside it, given to prepare (if not nil) before it is synced, then
// renamed over it, so that a reader sees the old content or the new.
// Missing directories on the way are made 0700. On error the file is as
// it was.
func (f *File) Replace(data []byte, perm fs.FileMode, prepare func(*os.File) error) error {
	return f.replace(bytes.NewReader(data), perm, prepare)
}

// ReplaceFrom is Replace with the new content read from r to its end.
func (f *File) ReplaceFrom(r io.Reader, perm fs.FileMode, prepare func(*os.File) error) error {
	return f.replace(r, perm, prepare)
}

// Remove removes the file.
func (f *File) Remove() error { return f.remove() }

// Close releases what Open holds; it is safe to call more than once.
func (f *File) Close() error {
	if f.Body != nil {
		f.Body.Close()
		f.Body = nil
	}
	return f.close()
}

// NotRegularError is a path that names something other than a regular
// file.
type NotRegularError struct {
	Path string
	Mode fs.FileMode
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is %s, not a regular file", e.Path, e.Kind())
}

// Kind says what the path names: "a directory", "a named pipe (FIFO)", ….
func (e *NotRegularError) Kind() string { return Kind(e.Mode) }

// Kind names the type of a file of mode m for a message: "a regular
// file", "a directory", "a named pipe (FIFO)", "a socket", "a character
// device", "a block device", "a symbolic link", else "a special file".
func Kind(m fs.FileMode) string {
	if m.IsRegular() {
		return "a regular file"
	}
	for _, k := range kinds {
		if m&k.bit != 0 {
			return k.name
		}
	}
	return "a special file"
}

// kinds are Kind's names by type bit, a character device (which has
// fs.ModeDevice too) before a block device.
var kinds = []struct {
	bit  fs.FileMode
	name string
}{
	{fs.ModeDir, "a directory"},
	{fs.ModeNamedPipe, "a named pipe (FIFO)"},
	{fs.ModeSocket, "a socket"},
	{fs.ModeCharDevice, "a character device"},
	{fs.ModeDevice, "a block device"},
	{fs.ModeSymlink, "a symbolic link"},
}

// TooLargeError is a file that holds more than Max bytes.
type TooLargeError struct {
	Path string
	// Max is the bound it passes; 0 means MaxSize.
	Max int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is larger than %s", e.Path, Size(e.max()))
}

func (e *TooLargeError) max() int64 {
	if e.Max == 0 {
		return MaxSize
	}
	return e.Max
}

// Size says n bytes for a message: "4 MiB", "256 KiB", "100 bytes".
func Size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// LinkError is a symbolic link on the way to a file that, run by root,
// Open does not follow: another user owns the link or its directory, or
// others may write that directory (one without the sticky bit), and so
// could point it anywhere.
type LinkError struct {
	// Path is the link.
	Path string
	// UID is the user who owns the link or, with Dir, its directory; -1
	// with Dir when others may write the directory.
	UID int
	// Dir says it is the link's directory that another user controls.
	Dir bool
}

func (e *LinkError) Error() string {
	switch {
	case !e.Dir:
		return fmt.Sprintf("%s is a symbolic link of user %d", e.Path, e.UID)
	case e.UID < 0:
		return fmt.Sprintf("%s is a symbolic link in a directory that others may write", e.Path)
	}
	return fmt.Sprintf("%s is a symbolic link in a directory of user %d", e.Path, e.UID)
}

// ReadRegular reads the file at path as os.ReadFile does, links
// followed, but only a regular file of at most max bytes: it opens the
// file without waiting for a FIFO's writer (O_NONBLOCK) and refuses
// anything else with a *NotRegularError, one larger with a
// *TooLargeError. It is for the files a program keeps in its own
// directories, such as records and locks: they hold no link another
// user controls, but a FIFO or a link to a device there (a planted one,
// a slip) must neither block nor run a read on until memory runs out.
// A missing file's error satisfies errors.Is(err, fs.ErrNotExist).
func ReadRegular(path string, max int64) ([]byte, fs.FileInfo, error) {
	h, err := os.OpenFile(path, os.O_RDONLY|nonBlock, 0)
	if err != nil {
		return nil, nil, err
	}
	defer h.Close()
	return readAtMost(h, path, max)
}

// take fills f from h, the file open found at f.Path: with large, f.Body
// is h itself once it is a regular file; else f.Data is its whole content
// (read) and h is closed.
func (f *File) take(h *os.File, large bool) error {
	if !large {
		defer h.Close()
		var err error
		f.Info, f.Data, err = read(h, f.Path)
		return err
	}
	var err error
	f.Info, err = h.Stat()
	if err == nil && !f.Info.Mode().IsRegular() {
		err = &NotRegularError{Path: f.Path, Mode: f.Info.Mode()}
	}
	if err != nil {
		h.Close()
		return err
	}
	f.Body = h
	return nil
}

// read takes what h, opened on path, holds: a regular file of at most
// MaxSize bytes, checked on the open descriptor itself.
func read(h *os.File, path string) (fs.FileInfo, []byte, error) {
	b, fi, err := readAtMost(h, path, MaxSize)
	return fi, b, err
}

// readAtMost is read with max for MaxSize. A descriptor opened
// O_NONBLOCK reads as a blocking one once it is known to be a regular
// file: the flag changes nothing there.
func readAtMost(h *os.File, path string, max int64) ([]byte, fs.FileInfo, error) {
	fi, err := h.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, &NotRegularError{Path: path, Mode: fi.Mode()}
	}
	tooLarge := &TooLargeError{Path: path}
	if max != MaxSize {
		tooLarge.Max = max
	}
	if fi.Size() > max {
		return nil, nil, tooLarge
	}
	// The file may grow while it is read.
	b, err := io.ReadAll(io.LimitReader(h, max+1))
	if err != nil {
		return nil, nil, err
	}
	if int64(len(b)) > max {
		return nil, nil, tooLarge
	}
	return b, fi, nil
}
