package boxsession

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/internal/sessionwire"
)

// maxRequestLine bounds a line of the requests FIFO, in bytes: a
// longer one is not a shell's (sessionwire.MaxShellRequest).
const maxRequestLine = 4096

// exitGrace is how long an exiting holder still reads requests after it
// removed its pid file: a shell that read the pid just before may write
// its request after; it is told to take the attacher's way.
const exitGrace = 100 * time.Millisecond

// takeRequests makes the shell's way in (sessionwire.ShellOpen) in dir:
// the requests FIFO, the gate and the pid file, and serves the requests
// until the returned stop is called (nil when they could not be made:
// attachers alone then reach the holder). Stop
// removes them, turns away what came meanwhile, and closes the gate, so
// that a shell still waiting on it goes on.
func (h *Holder) takeRequests(dir string) (stop func()) {
	reqPath, gatePath, pidPath := filepath.Join(dir, sessionwire.RequestFIFO), filepath.Join(dir, sessionwire.GateFIFO), filepath.Join(dir, sessionwire.PIDFile)
	// A gate left by a holder that died: a shell blocked opening it gets
	// a writer, then its end, and goes on.
	if g, err := os.OpenFile(gatePath, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		g.Close()
	}
	os.Remove(reqPath)
	os.Remove(gatePath)
	if unix.Mkfifo(reqPath, 0o600) != nil || unix.Mkfifo(gatePath, 0o600) != nil {
		os.Remove(reqPath)
		return nil
	}
	// Read and write: the FIFO never reads its end when a writer goes, and
	// what a shell wrote stays in it until read.
	reqs, err := os.OpenFile(reqPath, os.O_RDWR, 0)
	if err != nil {
		os.Remove(reqPath)
		os.Remove(gatePath)
		return nil
	}
	gate, err := os.OpenFile(gatePath, os.O_RDWR, 0)
	if err != nil {
		reqs.Close()
		os.Remove(reqPath)
		os.Remove(gatePath)
		return nil
	}
	tmp := pidPath + ".tmp"
	if os.WriteFile(tmp, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600) != nil || os.Rename(tmp, pidPath) != nil {
		os.Remove(tmp)
		reqs.Close()
		gate.Close()
		os.Remove(reqPath)
		os.Remove(gatePath)
		return nil
	}
	h.mu.Lock()
	h.pidPath = pidPath
	h.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.readRequests(reqs)
	}()
	return func() {
		h.mu.Lock()
		h.exiting = true
		h.mu.Unlock()
		os.Remove(pidPath)
		time.Sleep(exitGrace)
		os.Remove(reqPath)
		os.Remove(gatePath)
		// What is in the FIFO now is read (and turned away), then no more.
		reqs.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		<-done
		reqs.Close()
		gate.Close()
	}
}

// readRequests serves each line "PID REQUEST" of f (REQUEST an open's
// JSON, as an attacher's first line without env, dir or tty) until f
// fails.
func (h *Holder) readRequests(f *os.File) {
	r := bufio.NewReaderSize(f, maxRequestLine)
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				// Not one of ours: skipped to its end.
				for errors.Is(err, bufio.ErrBufferFull) {
					_, err = r.ReadSlice('\n')
				}
				continue
			}
			return
		}
		p, js, ok := bytes.Cut(bytes.TrimSuffix(line, []byte("\n")), []byte(" "))
		pid, perr := strconv.Atoi(string(p))
		var req request
		if !ok || perr != nil || pid <= 1 || json.Unmarshal(js, &req) != nil || req.Op != "open" || req.ID == "" || req.TTY != nil {
			h.logf("holder: a request line that is not one: %.80q", line)
			continue
		}
		go h.adopt(pid, req)
	}
}

// adopt serves request req of the shell pid, which waits on the gate:
// the command gets pid's environment and directory, the attachment its
// stdin and stdout (by pidfd_getfd: procStreams), and when it ends the
// shell gets SIGTERM (it exits 0). A shell whose streams cannot be taken
// so (not pipes), or that comes while the holder exits, gets SIGUSR1: it
// starts the attacher instead, the way of a box without this.
func (h *Holder) adopt(pid int, req request) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return
	}
	// Non-blocking, so that the runtime's poller waits for its exit.
	unix.SetNonblock(fd, true)
	pidf := os.NewFile(uintptr(fd), "pidfd")
	turnAway := func() {
		signalPidfd(pidf, unix.SIGUSR1)
		pidf.Close()
	}
	files, err := procStreams(fd)
	if err != nil {
		h.logf("session %s: the shell's streams: %v; it starts the attacher", req.ID, err)
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EACCES) {
			// Not allowed here (a seccomp filter, Yama): the shells that
			// come next take the attacher's way at once.
			h.dropRequests()
		}
		turnAway()
		return
	}
	env, dir, err := procEnv(pid)
	if err != nil || exited(pidf) {
		// Gone while read: its Exec ended.
		closeFiles(files)
		pidf.Close()
		return
	}
	req.Env, req.Dir, req.FDs = env, dir, true
	h.mu.Lock()
	if h.exiting {
		h.mu.Unlock()
		closeFiles(files)
		turnAway()
		return
	}
	h.conns++
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.conns--
		h.idle.Reset(idleExit)
		h.mu.Unlock()
	}()
	h.serveLink(&link{r: files[0], w: files[1], files: files, pid: pidf}, &req)
}

// procStreams takes the stdin and stdout of the shell of pidfd fd, its
// descriptors sessionwire.StdinFD and StdoutFD (pidfd_getfd(2): the same
// open files, as SCM_RIGHTS passes them), each a pipe. A pipe cannot be
// opened anew from /proc/PID/fd by the box user when the Exec's server
// made it as root.
func procStreams(fd int) ([]*os.File, error) {
	var files []*os.File
	for _, target := range []int{sessionwire.StdinFD, sessionwire.StdoutFD} {
		nfd, err := unix.PidfdGetfd(fd, target, 0)
		if err != nil {
			closeFiles(files)
			return nil, fmt.Errorf("pidfd_getfd: %w", err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(nfd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
			unix.Close(nfd)
			closeFiles(files)
			return nil, fmt.Errorf("fd %d is not a pipe", target)
		}
		// Non-blocking, for the runtime's poller (as readFirst's).
		unix.SetNonblock(nfd, true)
		files = append(files, os.NewFile(uintptr(nfd), "exec-stream"))
	}
	return files, nil
}

// procEnv is the environment of process pid as the shell that ran an
// Exec passes it to a program it runs (PWD, and bash's SHLVL, added when
// missing), and its directory ($PWD when that names it, as os.Getwd).
func procEnv(pid int) ([]string, string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return nil, "", err
	}
	dir, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil {
		return nil, "", err
	}
	var env []string
	for kv := range bytes.SplitSeq(b, []byte{0}) {
		if len(kv) > 0 {
			env = append(env, string(kv))
		}
	}
	if pwd := envOf(env, "PWD"); pwd != "" && filepath.IsAbs(pwd) && sameFile(pwd, dir) {
		dir = pwd
	} else {
		env = append(env, "PWD="+dir)
	}
	if filepath.Base(envOf(env, "SHELL")) == "bash" && envOf(env, "SHLVL") == "" {
		env = append(env, "SHLVL=0")
	}
	return env, dir, nil
}

func sameFile(a, b string) bool {
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}

// exited reports whether the process of pidfd f has exited.
func exited(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return true
	}
	gone := true
	rc.Control(func(fd uintptr) { gone = pollExited(fd) })
	return gone
}

// pollExited reports whether pidfd fd is readable: its process exited.
func pollExited(fd uintptr) bool {
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(pfd, 0)
	return err != nil && err != unix.EINTR || n > 0
}

// awaitExit returns once the process of pidfd f has exited or f is
// closed (true), or at once when f cannot be waited for (false: the
// attachment then ends with the Exec's stdin).
func awaitExit(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return true
	}
	return rc.Read(pollExited) == nil || exited(f)
}

// endShell tells the shell of pidfd f that its attachment ended: SIGTERM,
// on which it exits 0.
func endShell(f *os.File) { signalPidfd(f, unix.SIGTERM) }

// signalPidfd sends sig to the process of pidfd f.
func signalPidfd(f *os.File, sig unix.Signal) {
	if rc, err := f.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { unix.PidfdSendSignal(int(fd), sig, nil, 0) })
	}
}

// dropRequests turns the shells' way in off: without the pid file they
// run the attacher at once.
func (h *Holder) dropRequests() {
	h.mu.Lock()
	p := h.pidPath
	h.mu.Unlock()
	if p != "" {
		os.Remove(p)
	}
}
