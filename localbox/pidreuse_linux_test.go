package localbox

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	controlv1 "github.com/cocoonbox/cocoonbox/proto/cocoonbox/control/v1"
)

// A call that goes away ends its command's process group: SIGHUP, then
// SIGKILL killDelay later. The group's id is the leader's pid, which the
// system hands out again once the leader is reaped, and a box user can
// bring its number round (by forking, with /proc/sys/kernel/ns_last_pid
// to watch) so that the next process on the machine gets it. The late
// SIGKILL, sent by root, must then reach nothing: here a process of
// root's that leads its own session took the reaped leader's pid (the
// test sets ns_last_pid, as the box user's forking would) and must
// outlive the call's SIGKILL. Before, root killed it 2 s later.
func TestHostileGroupReused(t *testing.T) {
	h := newHostile(t, "")
	_, sock := h.serve()
	tok, err := IssueToken(h.state, "test", "test")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	spared(t, "a reaped leader", func() (int, func()) {
		return cancelledLeader(t, conn, tok), func() { time.Sleep(killDelay + time.Second) }
	})
}

// spared has free free a pid (its done waits until whatever may signal
// it has), has a process of root's take that pid (startAtPid) meanwhile,
// up to 10 times until one does, and fails the test unless that process
// outlives done.
func spared(t *testing.T, what string, free func() (pid int, done func())) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		pid, done := free()
		victim := startAtPid(t, pid)
		done()
		if victim == nil {
			if attempt == 10 {
				t.Fatalf("10 times another process took pid %d first", pid)
			}
			continue
		}
		// A signal sent takes a moment to end it.
		time.Sleep(500 * time.Millisecond)
		var ws syscall.WaitStatus
		if gone, _ := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); gone == pid {
			t.Fatalf("a process of root's that took the pid %d of %s was ended by root's signal (%v)", pid, what, ws.Signal())
		}
		victim.Process.Kill()
		victim.Wait()
		return
	}
}

// cancelledLeader starts a command in box main, reads its pid, goes away
// (as a client that drops) and waits until the leader is reaped.
func cancelledLeader(t *testing.T, conn *grpc.ClientConn, tok string) int {
	t.Helper()
	ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+tok))
	defer cancel()
	st, err := controlv1.NewSessionClient(conn).Exec(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&controlv1.ExecRequest{Msg: &controlv1.ExecRequest_Start{Start: &controlv1.Start{Box: DefaultBox, Command: "echo $$; exec sleep 600"}}}); err != nil {
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
		t.Fatalf("the command's pid: %q", out.String())
	}
	cancel()
	waitFor(t, "the leader to be reaped", func() bool {
		_, err := os.Stat("/proc/" + strconv.Itoa(pid))
		return errors.Is(err, fs.ErrNotExist)
	})
	return pid
}

// startAtPid starts a process of root's in a session of its own with pid
// pid, by setting ns_last_pid just below it, or returns nil when another
// process took pid first.
func startAtPid(t *testing.T, pid int) *exec.Cmd {
	t.Helper()
	f, err := os.OpenFile("/proc/sys/kernel/ns_last_pid", os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command("sleep", "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if _, err := f.WriteString(strconv.Itoa(pid - 1)); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if cmd.Process.Pid != pid {
		cmd.Process.Kill()
		cmd.Wait()
		return nil
	}
	return cmd
}

// What left its process group is ended by pid (endMarked): SIGTERM, then
// SIGKILL to each not gone after the grace. A box process that exits at
// the SIGTERM frees its pid at once, and the SIGKILL must not reach the
// process that takes it: here a process of root's (the test sets
// ns_last_pid, as the box user's forking would). Before, root killed it
// when the grace was up.
func TestHostileMarkedPidReused(t *testing.T) {
	h := newHostile(t, "")
	srv := &Server{Dir: h.state, User: DefaultUser, Logf: t.Logf}
	if err := srv.init(); err != nil {
		t.Fatal(err)
	}
	spared(t, "a marked process that exited at SIGTERM", func() (int, func()) {
		marked := exec.Command("sleep", "600")
		marked.Env = []string{markerVar + "=" + srv.Dir}
		marked.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: &syscall.Credential{Uid: h.u.uid, Gid: h.u.gid}}
		if err := marked.Start(); err != nil {
			t.Fatal(err)
		}
		ended := make(chan int, 1)
		go func() { ended <- srv.endMarked(killDelay) }()
		marked.Wait()
		return marked.Process.Pid, func() {
			if n := <-ended; n != 1 {
				t.Fatalf("endMarked found %d processes, want the one", n)
			}
		}
	})
}

// A recorded process group (procs/) whose leader is gone is ended by
// stop, start and a box's delete: SIGTERM to the group, then SIGKILL to
// it if it is still there after the grace. Once every process of it has
// exited its id is free, and the SIGKILL must not reach the group that
// takes it: here a process of root's leading its own session with that
// pid (the test sets ns_last_pid, as the box user's forking would).
// Before, root killed it when the grace was up.
func TestHostileRecordedGroupReused(t *testing.T) {
	h := newHostile(t, "")
	srv := &Server{Dir: h.state, User: DefaultUser, Logf: t.Logf}
	if err := srv.init(); err != nil {
		t.Fatal(err)
	}
	b, ok := srv.reg.get("", DefaultBox)
	if !ok {
		t.Fatal("no box main")
	}
	as := &syscall.Credential{Uid: h.u.uid, Gid: h.u.gid}
	spared(t, "a recorded group that exited at SIGTERM", func() (int, func()) {
		// A group of the box user's whose leader exited and was reaped,
		// and whose other process lives on.
		leader := exec.Command("sleep", "0")
		leader.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: as}
		if err := leader.Start(); err != nil {
			t.Fatal(err)
		}
		pgid := leader.Process.Pid
		member := exec.Command("sleep", "600")
		member.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: pgid, Credential: as}
		if err := member.Start(); err != nil {
			t.Fatal(err)
		}
		leader.Wait()
		srv.recordProc(b, pgid)
		ended := make(chan int, 1)
		go func() { ended <- srv.sweepWhere(killDelay, "") }()
		member.Wait()
		return pgid, func() {
			if n := <-ended; n != 1 {
				t.Fatalf("the sweep ended %d groups, want the one", n)
			}
		}
	})
}
