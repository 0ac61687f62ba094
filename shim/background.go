//go:build !windows

package shim

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// ReadyFDEnv names the variable through which the background process of
// -f learns its readiness pipe: the number of an inherited descriptor, to
// which it writes one byte once ready and which it then closes. It is
// internal to the shim: fork sets it for its own child only, and a run
// without -f ignores it.
const ReadyFDEnv = "COCOONBOX_SSH_READY_FD"

// fork is the foreground half of -f. Go cannot fork, so it runs Env.Argv
// again, in a new session (so that the terminal's signals and hangup
// leave it alone, as daemon(3) does for ssh), with stdin from /dev/null
// under -n (and -f), stdout and stderr shared, and ReadyFDEnv naming the
// write end of a pipe. It returns 0 once the child says it is ready;
// if the child ends first, it returns the child's status, 255 for a
// death by a signal, and the child has said why on the shared stderr. A
// signal to this process while it waits is passed on to the child, and
// the run then ends with 255 as ssh's would before it forks.
func (r *runner) fork() int {
	if len(r.env.Argv) == 0 {
		return r.fail(errors.New("-f: this program cannot run itself again in the background"))
	}
	// The background process gets the streams themselves: a pipe's copy
	// would end with this process.
	_, outFile := r.env.Stdout.(*os.File)
	_, errFile := r.env.Stderr.(*os.File)
	if !outFile || !errFile {
		return r.fail(errors.New("-f: stdout and stderr must be files, which the background process keeps"))
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return r.fail(fmt.Errorf("-f: %w", err))
	}
	defer pr.Close()
	cmd := exec.Command(r.env.Argv[0], r.env.Argv[1:]...)
	// The child's descriptor 3: ExtraFiles start after stdin, stdout, stderr.
	cmd.Env = append(withoutVar(r.env.Environ, ReadyFDEnv), ReadyFDEnv+"=3")
	cmd.ExtraFiles = []*os.File{pw}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if f, ok := r.env.Stdin.(*os.File); ok && !r.o.StdinNull {
		cmd.Stdin = f
	}
	cmd.Stdout, cmd.Stderr = r.env.Stdout, r.env.Stderr
	sigs := make(chan os.Signal, 4)
	notifyUnignored(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	err = cmd.Start()
	pw.Close()
	if err != nil {
		return r.fail(fmt.Errorf("-f: start the background process: %w", err))
	}
	r.debugf(LogDebug1, "forking to background: process %d", cmd.Process.Pid)
	readyc := make(chan bool, 1)
	go func() {
		var b [1]byte
		n, _ := io.ReadFull(pr, b[:])
		readyc <- n == 1
	}()
	interrupted := false
	for {
		select {
		case s := <-sigs:
			interrupted = true
			cmd.Process.Signal(s)
		case ok := <-readyc:
			if ok && !interrupted {
				cmd.Process.Release()
				return 0
			}
			cmd.Wait()
			code := cmd.ProcessState.ExitCode()
			if interrupted || code < 0 {
				return ExitFailure
			}
			return code
		}
	}
}

// inBackground reports whether this run is fork's child; if so it sets
// r.ready and keeps its own copies of the streams the session uses, as
// ssh's session channel holds dups of its descriptors, so that ready can
// point descriptors 0, 1 and 2 at /dev/null as ssh's fork_postauth does.
func (r *runner) inBackground() bool {
	v := r.getenv(ReadyFDEnv)
	if v == "" {
		return false
	}
	r.env.Environ = withoutVar(r.env.Environ, ReadyFDEnv)
	os.Unsetenv(ReadyFDEnv)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return false
	}
	syscall.CloseOnExec(fd)
	pipe := os.NewFile(uintptr(fd), "ready")
	if r.o.Session != SessionNone || r.o.StdioHost != "" {
		r.env.Stdin = dupStream(r.env.Stdin)
		r.env.Stdout = dupStream(r.env.Stdout)
		r.env.Stderr = dupStream(r.env.Stderr)
	}
	// As ssh: its own stderr stays open only for -v without -E.
	keepStderr := r.o.LogLevel >= LogDebug1 && r.o.LogFile == ""
	r.ready = sync.OnceFunc(func() {
		if null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0); err == nil {
			unix.Dup2(int(null.Fd()), 0)
			unix.Dup2(int(null.Fd()), 1)
			if !keepStderr {
				unix.Dup2(int(null.Fd()), 2)
			}
			null.Close()
		}
		pipe.Write([]byte{1})
		pipe.Close()
	})
	return true
}

// dupStream returns a copy of v's descriptor when v is one of the
// standard streams (*os.File), so that it outlives a dup2 over the
// original; else v.
func dupStream[T any](v T) T {
	f, ok := any(v).(*os.File)
	if !ok {
		return v
	}
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return v
	}
	return any(os.NewFile(uintptr(fd), f.Name())).(T)
}

// withoutVar is environ without name's entries.
func withoutVar(environ []string, name string) []string {
	var out []string
	for _, kv := range environ {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}
