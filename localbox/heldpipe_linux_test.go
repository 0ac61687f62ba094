package localbox

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	controlv1 "github.com/cocoonbox/cocoonbox/proto/cocoonbox/control/v1"
)

// takeEnv makes this test binary, started with it, the hostile box
// user's program of TestHostileHeldHelperPipe instead of the tests: it
// takes the stderr of every helper with a variable that begins with the
// value of takeEnv (takePipes).
const takeEnv = "LOCALBOX_TEST_TAKE_PIPES"

func init() {
	if mark := os.Getenv(takeEnv); mark != "" {
		takePipes(mark)
		os.Exit(0)
	}
}

// takePipes is the box user's program: it watches each new process
// without pause, for those of its own uid with a variable in their
// environment that begins with mark, and no local box's marker (the
// inbox's pipe goes to root's log copier, whose wait was bounded
// already); when such a one's stderr is a pipe, it takes that with
// pidfd_getfd (a process may take another's descriptors when it may
// ptrace it: the same uid, nothing more), keeps it open for good, and
// says "took pipe:[N]". It says "ready" once it watches.
func takePipes(mark string) {
	taken := map[string]bool{}
	var held []int
	// act does verb to pid, and reports whether pid is done with: gone,
	// not a helper, or acted on.
	act := func(pid int) bool {
		name := strconv.Itoa(pid)
		env, err := os.ReadFile("/proc/" + name + "/environ")
		if err != nil {
			// Not there, or not ours yet: root's child before its
			// setuid and exec.
			_, serr := os.Stat("/proc/" + name)
			return serr != nil
		}
		var marked string
		for _, kv := range strings.Split(string(env), "\x00") {
			if strings.HasPrefix(kv, mark) {
				marked = kv
			}
		}
		if marked == "" || bytes.Contains(env, []byte(markerVar+"=")) {
			return true
		}
		what, err := os.Readlink("/proc/" + name + "/fd/2")
		if err != nil || !strings.HasPrefix(what, "pipe:") || taken[what] {
			return err == nil
		}
		pfd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			return true
		}
		fd, err := unix.PidfdGetfd(pfd, 2, 0)
		unix.Close(pfd)
		if err != nil {
			return false
		}
		taken[what] = true
		held = append(held, fd)
		fmt.Printf("took %s\n", what)
		return true
	}
	// New processes are watched from the moment their pid is handed out
	// (pids are handed out in turn, and ns_last_pid says the last), each
	// for a while: a helper lives a few ms.
	lastPid := func() int {
		b, _ := os.ReadFile("/proc/sys/kernel/ns_last_pid")
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return n
	}
	watch := map[int]time.Time{}
	prev := lastPid()
	fmt.Println("ready")
	for {
		now := time.Now()
		if last := lastPid(); last != prev {
			if last < prev {
				// The numbers came round: from the top of the range.
				prev = 300
			}
			for p := prev + 1; p <= last; p++ {
				watch[p] = now
			}
			prev = last
		}
		for p, since := range watch {
			if now.Sub(since) > time.Second || act(p) {
				delete(watch, p)
			}
		}
	}
}

// startHostile starts this test binary, copied where the box user may
// run it, as the box user's program takePipes with mark,
// waits until it watches, ends it when the test does, and returns its
// lines.
func (h *hostile) startHostile(mark string) <-chan string {
	h.t.Helper()
	exe, err := os.Executable()
	if err != nil {
		h.t.Fatal(err)
	}
	prog := filepath.Join(h.bin, "take-pipes")
	if err := copyFile(exe, prog, 0o755); err != nil {
		h.t.Fatal(err)
	}
	cmd := exec.Command(prog)
	cmd.Env = []string{takeEnv + "=" + mark}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: &syscall.Credential{Uid: h.u.uid, Gid: h.u.gid}}
	out, err := cmd.StdoutPipe()
	if err != nil {
		h.t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	if l := <-lines; l != "ready" {
		h.t.Fatalf("the box user's program said %q; want ready", l)
	}
	return lines
}

// A box user keeps a process of its own after a stop (the local box
// ends those it started, and this one it did not), and the process takes
// the stderr pipe of root's helper that prepares the box's home at the
// next start (pidfd_getfd: the helper is the box user's). Root's wait for
// the end of that pipe held the start for good, and with it every later
// start: the state's lock stays with the one that hangs. Now the wait
// ends a moment after the helper exits, and the start serves.
func TestHostileHeldHelperPipe(t *testing.T) {
	h := newHostile(t, listeningAgent)
	h.start()
	took := h.startHostile("COCOONBOX_RUN_DIR=" + h.run())

	// The taker has to find the helper while it runs (a few ms): a start
	// at a time until it has, each of which must end.
	const starts = 200
	for i := 1; ; i++ {
		done := make(chan error, 1)
		go func() {
			srv := &Server{Dir: h.state, BinDir: h.bin, User: DefaultUser, Logf: t.Logf}
			err := srv.CreateBox(DefaultBox)
			srv.Stop()
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(time.Minute):
			select {
			case p := <-took:
				t.Fatalf("start %d still waits a minute after the box user %s, its helper's stderr", i, p)
			default:
				t.Fatalf("start %d still waits after a minute", i)
			}
		}
		if len(took) > 0 {
			t.Logf("the box user %s at start %d", <-took, i)
			break
		}
		if i == starts {
			t.Fatalf("the box user found no helper in %d starts", starts)
		}
	}

	// A start then serves, the taker still there.
	_, sock := h.serve()
	tok, err := IssueToken(h.state, "test", "test")
	if err != nil {
		t.Fatal(err)
	}
	if code := rawExec(t, sock, tok, &controlv1.Start{Box: DefaultBox, Command: "true"}); code != 0 {
		t.Fatalf("a command after the start: exit %d", code)
	}
}

// copyFile copies file src to a new file dst of mode perm.
func copyFile(src, dst string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	o, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(o, in); err != nil {
		o.Close()
		return err
	}
	return o.Close()
}

// A command leaves a process out of its group that holds its stdout
// (setsid, as a daemon does), and its call goes away. The call ended
// only at the end of the output, which that process holds as long as
// it likes, so the server's Stop, which waits for every call, never
// returned: `localbox stop` came to its SIGKILL. Now the call ends
// pipeDelay after its group was killed, with pipes and with a terminal.
func TestHeldOutputCallEnds(t *testing.T) {
	for _, tty := range []bool{false, true} {
		t.Run(fmt.Sprintf("tty=%v", tty), func(t *testing.T) {
			srv := &Server{Dir: t.TempDir(), Logf: t.Logf}
			lis, _, err := Listen(srv.Dir, "")
			if err != nil {
				t.Fatal(err)
			}
			served := make(chan error, 1)
			go func() { served <- srv.Serve(lis) }()
			tok, err := IssueToken(srv.Dir, "test", "test")
			if err != nil {
				t.Fatal(err)
			}
			conn, err := grpc.NewClient("unix://"+SocketPath(srv.Dir), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+tok))
			defer cancel()
			st, err := controlv1.NewSessionClient(conn).Exec(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// The daemon says its pid once in its own session; it is ended
			// by hand in the end too (Stop ends only what kept its marker).
			start := &controlv1.Start{Box: DefaultBox, Command: "setsid sh -c 'echo $$; exec sleep 600' & wait"}
			if tty {
				start.Tty = &controlv1.Tty{Term: "dumb", Rows: 24, Cols: 80}
			}
			if err := st.Send(&controlv1.ExecRequest{Msg: &controlv1.ExecRequest_Start{Start: start}}); err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			for !strings.Contains(out.String(), "\n") {
				m, err := st.Recv()
				if err != nil {
					t.Fatal(err)
				}
				out.Write(m.GetStdout())
			}
			pid, err := strconv.Atoi(strings.TrimSpace(out.String()))
			if err != nil {
				t.Fatalf("the daemon's pid: %q", out.String())
			}
			defer syscall.Kill(pid, syscall.SIGKILL)
			cancel()
			stopped := make(chan struct{})
			go func() {
				srv.Stop()
				close(stopped)
			}()
			select {
			case <-stopped:
			case <-time.After(time.Minute):
				syscall.Kill(pid, syscall.SIGKILL)
				<-stopped
				t.Fatal("Stop still waited a minute later for a call whose client had gone, while a process that left its group held the output")
			}
			if err := <-served; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A box user may hold up each helper that prepares a home of its at a
// start: stop it with SIGSTOP (the helper is the box user's), or take its
// pipe. Each was killed after asUserTimeout, one box after another, so
// that with two boxes a start took past the 15 s `localbox start` waits,
// which then gave up: no start served. Now a start prepares every home
// at once and waits for them together. Here each helper waits for the
// test, which lets them go once the helpers of all three boxes run at
// the same time; before, they ran one at a time, each killed in turn.
func TestHostileHeldHelpersAtOnce(t *testing.T) {
	h := newHostile(t, listeningAgent)
	names := []string{DefaultBox, "two", "three"}
	srv := &Server{Dir: h.state, BinDir: h.bin, User: DefaultUser, Logf: t.Logf}
	for _, n := range names {
		if err := srv.CreateBox(n); err != nil {
			t.Fatal(err)
		}
	}
	srv.Stop()

	let := filepath.Join(h.rootDir, "go")
	done := make(chan error, 1)
	go func() {
		srv := &Server{Dir: h.state, BinDir: h.bin, User: DefaultUser, Logf: t.Logf,
			homeScript: "until [ -e '" + let + "' ]; do sleep 0.05; done"}
		err := srv.init()
		srv.Stop()
		done <- err
	}()
	most := 0
	for waiting := true; waiting; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			waiting = false
		case <-time.After(20 * time.Millisecond):
			at := 0
			for _, n := range names {
				ps := markedProcs([]uint32{h.u.uid}, "COCOONBOX_RUN_DIR="+RunDir(filepath.Join(h.state, "boxes", n)))
				if len(ps) > 0 {
					at++
				}
				for _, p := range ps {
					p.Release()
				}
			}
			most = max(most, at)
			if at == len(names) {
				if err := os.WriteFile(let, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if most < len(names) {
		t.Errorf("the helpers of at most %d boxes ran at the same time; want all %d, the homes prepared at once", most, len(names))
	}
}
