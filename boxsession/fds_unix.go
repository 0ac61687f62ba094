//go:build unix

package boxsession

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// sendWithFiles writes line on c with in and out riding along (SCM_RIGHTS):
// the holder then reads and writes them itself, and the bytes skip this
// process. It reports false, having sent nothing, when c cannot carry
// descriptors.
func sendWithFiles(c net.Conn, line []byte, in, out *os.File) (bool, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return false, nil
	}
	// Fd would make in and out blocking; SyscallConn leaves them be.
	var fds []int
	for _, f := range []*os.File{in, out} {
		rc, err := f.SyscallConn()
		if err != nil {
			return false, nil
		}
		rc.Control(func(fd uintptr) { fds = append(fds, int(fd)) })
	}
	_, _, err := uc.WriteMsgUnix(line, syscall.UnixRights(fds...), nil)
	return true, err
}

// readFirst reads the first bytes an attacher sent into b, with the
// descriptors that rode along (non-blocking, closed on exec).
func readFirst(c net.Conn, b []byte) (int, []*os.File, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		n, err := c.Read(b)
		return n, nil, err
	}
	oob := make([]byte, syscall.CmsgSpace(4*4))
	n, oobn, _, _, err := uc.ReadMsgUnix(b, oob)
	msgs, _ := syscall.ParseSocketControlMessage(oob[:oobn])
	var files []*os.File
	for _, m := range msgs {
		fds, _ := syscall.ParseUnixRights(&m)
		for _, fd := range fds {
			syscall.CloseOnExec(fd)
			syscall.SetNonblock(fd, true)
			files = append(files, os.NewFile(uintptr(fd), "exec-stream"))
		}
	}
	return n, files, err
}

// writev writes bufs to w, in one system call per try when w is a file.
func writev(w io.Writer, bufs net.Buffers) error {
	f, ok := w.(*os.File)
	if !ok {
		_, err := bufs.WriteTo(w)
		return err
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	for len(bufs) > 0 {
		var n int
		var werr error
		if err := rc.Write(func(fd uintptr) bool {
			n, werr = unix.Writev(int(fd), bufs)
			return !errors.Is(werr, unix.EAGAIN)
		}); err != nil {
			return err
		}
		if werr != nil {
			return werr
		}
		for n > 0 {
			k := min(n, len(bufs[0]))
			bufs[0] = bufs[0][k:]
			n -= k
			if len(bufs[0]) == 0 {
				bufs = bufs[1:]
			}
		}
		for len(bufs) > 0 && len(bufs[0]) == 0 {
			bufs = bufs[1:]
		}
	}
	return nil
}

// writeNow writes what of b pipe f takes without waiting: 0 when it is
// full, an error when its reader is gone.
func writeNow(f *os.File, b []byte) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, nil
	}
	var n int
	var werr error
	if err := rc.Write(func(fd uintptr) bool {
		for {
			n, werr = unix.Write(int(fd), b)
			if werr != unix.EINTR {
				break
			}
		}
		return true
	}); err != nil {
		return 0, err
	}
	if werr == unix.EAGAIN {
		return 0, nil
	}
	return max(n, 0), werr
}
