package boxsession

import (
	"errors"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// pending is how many bytes wait to be read in pipe f, 0 when none or
// when f is not a pipe (or cannot be asked); it waits until f is
// readable, and returns the first read's bytes (into b) and error
// when it found nothing to count: at its end, or a file that does not
// count.
func pending(f *os.File, b []byte) (avail, n int, err error) {
	rc, err := f.SyscallConn()
	if err != nil {
		n, err = f.Read(b)
		return 0, n, err
	}
	rerr := rc.Read(func(fd uintptr) bool {
		if a, ierr := unix.IoctlGetInt(int(fd), unix.TIOCINQ); ierr == nil && a > 0 {
			avail = a
			return true
		}
		for {
			n, err = unix.Read(int(fd), b)
			if err != unix.EINTR {
				break
			}
		}
		if err == unix.EAGAIN {
			return false
		}
		if n < 0 {
			n = 0
		}
		if n == 0 && err == nil {
			err = io.EOF
		}
		return true
	})
	if rerr != nil {
		return 0, 0, rerr
	}
	return avail, n, err
}

// tee duplicates up to n bytes from the front of pipe src into pipe dst
// without taking them from src (tee(2): the pages are shared, not
// copied), waiting while dst is full; errNoTee when either is not a pipe.
func tee(src, dst *os.File, n int) (int, error) {
	t, terr, werr := pipeCall(src, dst, func(in, out int) (int64, error) {
		return unix.Tee(in, out, n, unix.SPLICE_F_NONBLOCK)
	})
	if werr != nil {
		return 0, werr
	}
	if terr == unix.EINVAL {
		return 0, errNoTee
	}
	return max(int(t), 0), terr
}

// pipeCall runs call, a non-blocking tee(2) or splice(2) from src's
// descriptor to dst's, again after EINTR and, while it says EAGAIN, once
// dst's poller says it has room. k and cerr are call's last answer
// (errNoTee when either file has no descriptor), werr the poller's (a
// deadline of dst, dst closed).
func pipeCall(src, dst *os.File, call func(in, out int) (int64, error)) (k int64, cerr, werr error) {
	src1, err := src.SyscallConn()
	if err != nil {
		return 0, errNoTee, nil
	}
	dst1, err := dst.SyscallConn()
	if err != nil {
		return 0, errNoTee, nil
	}
	werr = dst1.Write(func(out uintptr) bool {
		if err := src1.Control(func(in uintptr) {
			for {
				if k, cerr = call(int(in), int(out)); cerr != unix.EINTR {
					return
				}
			}
		}); err != nil {
			cerr = err
			return true
		}
		return cerr != unix.EAGAIN
	})
	return k, cerr, werr
}

// haveSplice says splice(2) is there.
const haveSplice = true

// splice moves up to n bytes from the front of pipe src into pipe dst
// (splice(2): the pages move, nothing is copied), as much as src has now;
// while dst is full it waits for room, up to wait: 0 then, or errNoTee
// when either is not a pipe.
func splice(src, dst *os.File, n int, wait time.Duration) (int, error) {
	dst.SetWriteDeadline(time.Now().Add(wait))
	k, serr, werr := pipeCall(src, dst, func(in, out int) (int64, error) {
		return unix.Splice(in, nil, out, nil, n, unix.SPLICE_F_NONBLOCK|unix.SPLICE_F_MOVE)
	})
	dst.SetWriteDeadline(time.Time{})
	switch {
	case errors.Is(werr, os.ErrDeadlineExceeded) || serr == unix.EAGAIN:
		return 0, nil
	case werr != nil:
		return 0, werr
	case serr == unix.EINVAL:
		return 0, errNoTee
	case serr != nil:
		return 0, serr
	}
	return int(k), nil
}
