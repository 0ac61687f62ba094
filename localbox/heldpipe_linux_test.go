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

// takeFDsEnv makes this test binary, started with it, the hostile box
// user's program of TestHostileHeldHelperPipe instead of the tests: it
// takes the stderr of every process of its uid whose environment holds
// the value of takeFDsEnv (a box's COCOONBOX_RUN_DIR=…) and holds it.
const takeFDsEnv = "LOCALBOX_TEST_TAKE_FDS"

func init() {
	if mark := os.Getenv(takeFDsEnv); mark != "" {
		takeFDs(mark)
		os.Exit(0)
	}
}

// takeFDs is the box user's program: it looks through /proc without
// pause for processes of its own uid that carry mark in their
// environment, and no local box's marker, and whose stderr is a pipe, takes that pipe with
// pidfd_getfd (a process may take another's descriptors when it may
// ptrace it: the same uid, nothing more), keeps it open for good, and
// says "took pipe:[N]" on stdout for each.
func takeFDs(mark string) {
	want := []byte("\x00" + mark + "\x00")
	taken := map[string]bool{}
	var held []int
	// Processes seen on the last pass that were not a helper's stay
	// so: /proc is looked through faster for the new ones.
	skip := map[string]bool{}
	for {
		ents, _ := os.ReadDir("/proc")
		seen := make(map[string]bool, len(ents))
		for _, e := range ents {
			name := e.Name()
			if skip[name] {
				seen[name] = true
				continue
			}
			pid, err := strconv.Atoi(name)
			if err != nil || pid == os.Getpid() {
				continue
			}
			env, err := os.ReadFile("/proc/" + name + "/environ")
			// Not the inbox (its stderr goes to root's log copier, whose
			// wait is bounded): the helper's environment has no marker.
			if err != nil || !bytes.Contains(append([]byte{0}, env...), want) || bytes.Contains(env, []byte(markerVar+"=")) {
				seen[name] = true
				continue
			}
			what, err := os.Readlink("/proc/" + name + "/fd/2")
			if err != nil || !strings.HasPrefix(what, "pipe:") || taken[what] {
				continue
			}
			pfd, err := unix.PidfdOpen(pid, 0)
			if err != nil {
				continue
			}
			fd, err := unix.PidfdGetfd(pfd, 2, 0)
			unix.Close(pfd)
			if err != nil {
				continue
			}
			taken[what] = true
			held = append(held, fd)
			fmt.Printf("took %s\n", what)
		}
		skip = seen
	}
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
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(h.bin, "take-fds")
	if err := copyFile(exe, prog, 0o755); err != nil {
		t.Fatal(err)
	}
	taker := exec.Command(prog)
	taker.Env = []string{takeFDsEnv + "=COCOONBOX_RUN_DIR=" + h.run()}
	taker.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: &syscall.Credential{Uid: h.u.uid, Gid: h.u.gid}}
	out, err := taker.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	taker.Stderr = os.Stderr
	if err := taker.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		taker.Process.Kill()
		taker.Wait()
	})
	took := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			took <- sc.Text()
		}
	}()

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
