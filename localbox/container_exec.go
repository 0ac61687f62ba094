package localbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cocoonbox/cocoonbox/boxexec"
	"github.com/cocoonbox/cocoonbox/internal/proc"
	controlv1 "github.com/cocoonbox/cocoonbox/proto/cocoonbox/control/v1"
)

// A container box's fast exec path (package boxexec): at each start of
// the box, the local box starts `cocoonbox-agent exec-serve` in it once
// through the engine's API, as the box user; the server connects out to
// a socket the local box listens on in a directory of its own, bound
// read-only into the box at guestExecDir. Each command then goes to that
// server with its pipes (a command on a terminal gets one the server
// opens in the box, relayed to two pipes), so its bytes skip the engine.
// A box without the server (a container made before it, an image without
// the agent) takes the API path until its next start; one whose server
// went away (killed in the box) takes it until revive has started a new
// one.

// guestExecDir is where the box sees the directory of the exec server's
// socket.
const guestExecDir = "/run/cocoonbox-exec"

// execSockName is the exec server's socket in that directory.
const execSockName = "exec.sock"

// serverWait bounds how long a box start waits for its exec server to
// connect.
const serverWait = 5 * time.Second

// A box's exec server that went away while its box runs is started
// again after reviveMin, then after twice the last wait, up to
// reviveMax, for as long as each one lasts less than reviveStable: a box
// user who kills it in a loop costs the engine one exec a minute.
const (
	reviveMin    = time.Second
	reviveMax    = time.Minute
	reviveStable = time.Minute
)

// execHosts are the local box's ends of its boxes' exec servers, by box id.
type execHosts struct {
	mu    sync.Mutex
	hosts map[string]*execHost
}

// execHost is one box's end of its exec server.
type execHost struct {
	*boxexec.Host
	// starting serialises the starts of the server (the box's start and
	// revive): one at a time, each only while none is connected.
	starting sync.Mutex
}

// execDir is the host directory of box b's exec socket, which the box
// sees at guestExecDir: root's, 0711, inside execGuard, so that the
// box's own directory being searchable (a box the process engine made,
// whose Unix user had to reach its home) opens it to no user of the
// host; the box sees it read-only and cannot plant anything in it.
func execDir(b *box) string { return filepath.Join(execGuard(b), "box") }

// execGuard is the directory above execDir: root's and 0700, so that
// only root and the box, through its bind mount, reach the socket.
// (Before, execDir was b.dir/exec itself, 0711: any user of the host
// who could search b.dir connected and became the box's exec server,
// taking its commands' stdin.)
func execGuard(b *box) string { return filepath.Join(b.dir, "exec") }

// mkdirRoot makes directory d with perm, or checks that what is there is
// a directory (not a link: mkdirOwn), and sets perm through a descriptor
// opened without following a link, so that a link put there after the
// check is not followed either.
func mkdirRoot(d string, perm os.FileMode) error {
	if err := mkdirOwn(d, perm); err != nil {
		return err
	}
	return chmodDir(d, perm)
}

// execMount is the bind mount of box b's exec directory, which it makes.
func execMount(b *box) (mount.Mount, error) {
	if err := mkdirRoot(execGuard(b), 0o700); err != nil {
		return mount.Mount{}, err
	}
	if err := mkdirRoot(execDir(b), 0o711); err != nil {
		return mount.Mount{}, err
	}
	return mount.Mount{Type: mount.TypeBind, Source: execDir(b), Target: guestExecDir, ReadOnly: true}, nil
}

// execHost is box b's exec host, listening (made when there is none,
// with its revive), or nil when it cannot listen.
func (e *containerEngine) execHost(b *box, create bool) *execHost {
	e.fast.mu.Lock()
	defer e.fast.mu.Unlock()
	if h := e.fast.hosts[b.ID]; h != nil || !create {
		return h
	}
	// A container made with the guard's directory as its mount (before
	// the guard) has no execDir: it takes the API path.
	if err := mkdirRoot(execGuard(b), 0o700); err != nil {
		return nil
	}
	if _, err := os.Lstat(execDir(b)); err != nil {
		return nil
	}
	bh, err := boxexec.ListenPeer(filepath.Join(execDir(b), execSockName), execPeer)
	if err != nil {
		e.s.logf("box %s: exec server socket: %v", b.Name, err)
		return nil
	}
	if e.fast.hosts == nil {
		e.fast.hosts = map[string]*execHost{}
	}
	h := &execHost{Host: bh}
	e.fast.hosts[b.ID] = h
	go e.revive(b, h)
	return h
}

// execPeer refuses a connection to an exec socket made by a process of
// the local box's own pid namespace: the box's exec server runs in its
// container's. A second layer behind execGuard's mode: whoever reached
// the socket from the host (root, or a user through a directory left
// open) cannot become a box's exec server and take its commands' stdin.
func execPeer(pid int) error {
	self, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return err
	}
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
	if err != nil {
		return err
	}
	if ns == self {
		return fmt.Errorf("process %d is the host's, not the box's", pid)
	}
	return nil
}

// revive starts box b's exec server again when its connection goes while
// the box runs (a box user can kill it: it is theirs), waiting between
// tries as reviveMin says; meanwhile the box's commands take the API
// path. A box that went to sleep gets its server at its next start.
func (e *containerEngine) revive(b *box, h *execHost) {
	wait := reviveMin
	for {
		if !h.Await(true) {
			return
		}
		up := time.Now()
		if !h.Await(false) {
			return
		}
		if time.Since(up) >= reviveStable {
			wait = reviveMin
		}
		for !h.Connected() {
			select {
			case <-h.Done():
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, reviveMax)
			b.mu.Lock()
			asleep := b.Hibernated || b.deleted
			b.mu.Unlock()
			if asleep {
				break
			}
			ctr, _, _ := e.names(b)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			e.runExecServer(ctx, b, h, ctr)
			cancel()
		}
	}
}

// dropExecHost closes box b's exec host: the box is going away.
func (e *containerEngine) dropExecHost(b *box) {
	e.fast.mu.Lock()
	h := e.fast.hosts[b.ID]
	delete(e.fast.hosts, b.ID)
	e.fast.mu.Unlock()
	if h != nil {
		h.Close()
	}
}

// closeExecHosts closes every exec host: the server is going away.
func (e *containerEngine) closeExecHosts() {
	e.fast.mu.Lock()
	hs := e.fast.hosts
	e.fast.hosts = nil
	e.fast.mu.Unlock()
	for _, h := range hs {
		h.Close()
	}
}

// startExecServer starts box b's exec server in its container ctr unless
// one is connected, and waits (up to serverWait) for it to connect. A
// container without the socket's mount or the agent gets none: its
// commands take the API path.
func (e *containerEngine) startExecServer(ctx context.Context, b *box, ctr string) {
	if e.s.agentPath() == "" {
		return
	}
	if h := e.execHost(b, true); h != nil {
		e.runExecServer(ctx, b, h, ctr)
	}
}

// runExecServer is startExecServer with box b's exec host h.
func (e *containerEngine) runExecServer(ctx context.Context, b *box, h *execHost, ctr string) {
	h.starting.Lock()
	defer h.starting.Unlock()
	if h.Connected() {
		return
	}
	// The server's environment is the container's, as an exec's: each
	// command's is laid over it.
	cr, err := e.cli.ExecCreate(ctx, ctr, client.ExecCreateOptions{
		User: "1000:1000",
		Cmd:  []string{guestAgent, "exec-serve", guestExecDir + "/" + execSockName},
	})
	if err == nil {
		_, err = e.cli.ExecStart(ctx, cr.ID, client.ExecStartOptions{Detach: true})
	}
	if err != nil {
		e.s.logf("box %s: exec server: %v", b.Name, err)
		return
	}
	deadline := time.Now().Add(serverWait)
	for time.Now().Before(deadline) {
		if h.WaitConnected(50 * time.Millisecond) {
			return
		}
		// One that exited (no mount in an older container) is not waited for.
		if res, err := e.cli.ExecInspect(ctx, cr.ID, client.ExecInspectOptions{}); err != nil || !res.Running {
			if !h.Connected() {
				e.s.logf("box %s: no exec server (exit %d): its commands take the engine's API", b.Name, res.ExitCode)
			}
			return
		}
	}
}

// errAPIPath is fastExec's answer when the command takes the API path.
var errAPIPath = errors.New("take the engine's API")

// fastExec starts a command through box b's exec server in dir, on a
// terminal the server opens when start asks for one; errAPIPath when
// there is no server, or the request is too long for it.
func (e *containerEngine) fastExec(b *box, start *controlv1.Start, dir string) (running, error) {
	h := e.execHost(b, false)
	if h == nil || !h.Connected() {
		return nil, errAPIPath
	}
	req := &boxexec.Request{Path: "/bin/bash", Env: e.environ(b, start), Dir: dir}
	if c := start.GetCommand(); c == "" {
		req.Args = []string{"-bash"}
	} else {
		req.Args = []string{"/bin/bash", "-c", c}
	}
	n := 3
	if t := start.GetTty(); t != nil {
		// 0x0 stays 0x0, as under the process engine.
		req.TTY = &boxexec.TTY{Rows: uint16(t.GetRows()), Cols: uint16(t.GetCols()), Modes: t.GetModes()}
		if data := t.GetTerminfo(); len(data) > 0 && len(data) <= maxTerminfo && termRE().MatchString(t.GetTerm()) {
			req.TTY.Term, req.TTY.Terminfo = t.GetTerm(), data
		}
		// The terminal's output is all on stdout.
		n = 2
	}
	child, ours, err := stdioPipes(n)
	if err != nil {
		return nil, err
	}
	cmd, err := h.Start(req, child[0], child[1], child[2])
	closeAll(child[:n])
	if err != nil {
		closeAll(ours[:n])
		var se *boxexec.StartError
		switch {
		case errors.Is(err, boxexec.ErrNoServer), errors.Is(err, boxexec.ErrTooLarge):
			return nil, errAPIPath
		case errors.As(err, &se):
			return nil, startError(b, start, "/bin/bash", err)
		}
		return nil, status.Errorf(codes.Internal, "exec in box %s: %v", b.Name, err)
	}
	x := &serverExec{cmd: cmd, stdin: ours[0], tty: n == 2, outs: []output{{r: cmd.Output(ours[1])}}}
	if !x.tty {
		x.outs = append(x.outs, output{r: cmd.Output(ours[2]), stderr: true})
	}
	return x, nil
}

// serverExec is a command the box's exec server started: its pipes are
// the local box's own, as a host process's. On a terminal (tty) its
// output is all on the first.
type serverExec struct {
	cmd    *boxexec.Cmd
	stdin  *os.File
	tty    bool
	outs   []output
	mu     sync.Mutex
	closed bool
}

func (x *serverExec) streams() []output { return x.outs }

func (x *serverExec) write(p []byte) {
	x.mu.Lock()
	closed := x.closed
	x.mu.Unlock()
	if !closed {
		// An error means the command closed its stdin; the rest is
		// dropped, as sshd does.
		x.stdin.Write(p)
	}
}

func (x *serverExec) closeStdin() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.closed {
		x.closed = true
		x.stdin.Close()
	}
}

// closeStdout closes our end of stdout, as process.closeStdout; a
// terminal stays open, as under sshd.
func (x *serverExec) closeStdout() {
	if !x.tty {
		x.outs[0].r.Close()
	}
}

func (x *serverExec) signal(name string) {
	if sig := proc.SignalNum(name); sig != 0 {
		x.cmd.Signal(sig)
	}
}

func (x *serverExec) resize(rows, cols uint32) {
	if x.tty && rows > 0 && cols > 0 {
		x.cmd.Resize(uint16(rows), uint16(cols))
	}
}

func (x *serverExec) kill() { x.cmd.Kill(killDelay) }

func (x *serverExec) wait() *controlv1.Exit {
	ex := x.cmd.Wait()
	switch {
	case ex.Err != nil:
		return &controlv1.Exit{Code: 255, Error: ex.Err.Error()}
	case ex.Signal != 0:
		return &controlv1.Exit{Signal: proc.SignalName(ex.Signal)}
	}
	return &controlv1.Exit{Code: int32(ex.Code)}
}

func (x *serverExec) close() {
	x.closeStdin()
	for _, o := range x.outs {
		o.r.Close()
	}
}
