package offload

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/safefile"
)

// Member is one regular file of the send stream (contract "Send stream").
type Member struct {
	// Name is the member's path in the archive: handover.md, env.json,
	// offload.bundle, HEAD, index or secrets/<entry>.
	Name string
	// Data is the content of a small member made in memory; nil when Path
	// is set.
	Data []byte
	// Path is a file read straight into the stream when the member is
	// written, never copied elsewhere. It is opened without following a
	// symlink and must be a regular file.
	Path string
}

// WriteStream writes members, in order, as a tar archive of regular files
// (ustar, or pax for a long name) to w. A Path member that is not a
// regular file, or that changes size while it is read, is an error.
func WriteStream(w io.Writer, members []Member) error {
	tw := tar.NewWriter(w)
	for _, m := range members {
		if err := writeMember(tw, m); err != nil {
			return fmt.Errorf("stream %s: %w", m.Name, err)
		}
	}
	return tw.Close()
}

func writeMember(tw *tar.Writer, m Member) error {
	if m.Name == "" || path.IsAbs(m.Name) || path.Clean(m.Name) != m.Name || strings.HasPrefix(m.Name, "../") {
		return fmt.Errorf("bad member name %q", m.Name)
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: m.Name, Mode: 0o600, ModTime: time.Unix(0, 0)}
	if m.Path == "" {
		hdr.Size = int64(len(m.Data))
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := io.Copy(tw, bytes.NewReader(m.Data))
		return err
	}
	f, err := openRegular(m.Path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	hdr.Size = fi.Size()
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	n, err := io.Copy(tw, f)
	if err == nil && n != hdr.Size {
		err = fmt.Errorf("%s changed size while it was read", m.Path)
	}
	return err
}

// openRegular opens p for reading without following a final symlink and
// refuses anything but a regular file (a FIFO would block the open
// otherwise, hence O_NONBLOCK).
func openRegular(p string) (*os.File, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|safefile.NoFollow|syscall.O_NONBLOCK, 0)
	if err != nil {
		if pe, ok := err.(*os.PathError); ok && pe.Err == syscall.ELOOP {
			return nil, fmt.Errorf("%s is a symlink; only regular files are sent", p)
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	return f, nil
}
