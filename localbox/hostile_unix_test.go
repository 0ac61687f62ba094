//go:build unix

package localbox

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// The hostile box user: a local box served by root runs box commands as
// the box user `user` (scripts/deps.sh makes it), who owns the box's home
// and run directories and so can plant links there before the server's
// next step. Each test plants what an attacker would, then lets the server
// do what it does on a start, an inbox's start or an `rsh -t`, and checks
// that the root-owned stand-ins are untouched and nothing was made where
// only root may write (docs/security.md "The box boundary").

// hostile is one state directory of a root-run local box and the stand-ins
// a box user aims at.
type hostile struct {
	t     *testing.T
	state string
	bin   string
	// rootDir is root's and 0755: the box user may search it, not write
	// it. standin is a root-owned 0644 file in it.
	rootDir, standin string
	u                *boxUser
}

const standinText = "root's own\n"

// newHostile makes the state directory (reachable by the box user), a
// bin directory holding agent as cocoonbox-agent (none when ""), and the
// stand-ins. It fails, never skips, when the box user is missing: as root
// the suite must run.
func newHostile(t *testing.T, agent string) *hostile {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the box boundary exists only for a local box served by root")
	}
	u, err := lookupBoxUser(DefaultUser)
	if err != nil {
		t.Fatalf("%v (scripts/deps.sh test makes it)", err)
	}
	base := t.TempDir()
	for d := base; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		os.Chmod(d, 0o711)
	}
	h := &hostile{t: t, state: filepath.Join(base, "state"), bin: filepath.Join(base, "bin"), rootDir: filepath.Join(base, "root"), u: u}
	h.standin = filepath.Join(h.rootDir, "standin")
	// A test whose server is never stopped leaves box main's run
	// directory, outside the state directory.
	t.Cleanup(func() { os.RemoveAll(h.run()) })
	for _, d := range []string{h.bin, h.rootDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(h.standin, []byte(standinText), 0o644); err != nil {
		t.Fatal(err)
	}
	if agent != "" {
		if err := os.WriteFile(filepath.Join(h.bin, "cocoonbox-agent"), []byte(agent), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// serve starts a Server on the state directory and stops it at the end
// of the test; its log lines go to the test's log.
func (h *hostile) serve() (*Server, string) {
	h.t.Helper()
	srv := &Server{Dir: h.state, BinDir: h.bin, User: DefaultUser, Logf: h.t.Logf}
	if err := srv.init(); err != nil {
		h.t.Fatal(err)
	}
	lis, _, err := Listen(srv.Dir, "")
	if err != nil {
		h.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	h.t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return srv, SocketPath(srv.Dir)
}

// start runs a Server's start (its boxes prepared, no listener) and stops it.
func (h *hostile) start() {
	h.t.Helper()
	srv := &Server{Dir: h.state, BinDir: h.bin, User: DefaultUser, Logf: h.t.Logf}
	if err := srv.CreateBox(DefaultBox); err != nil {
		h.t.Fatal(err)
	}
	srv.Stop()
}

func (h *hostile) home() string { return filepath.Join(h.state, "boxes", DefaultBox, "home") }
func (h *hostile) run() string  { return RunDir(filepath.Join(h.state, "boxes", DefaultBox)) }

// plant makes a symbolic link at path (in the box) to target, owned by
// the box user as if it had made it, with the directories above it.
func (h *hostile) plant(path, target string) {
	h.t.Helper()
	h.mkdirs(filepath.Dir(path))
	if err := os.Symlink(target, path); err != nil {
		h.t.Fatal(err)
	}
	os.Lchown(path, int(h.u.uid), int(h.u.gid))
}

// mkdirs makes the directories from the box's home or run down to d as
// the box user's.
func (h *hostile) mkdirs(d string) {
	if d == h.run() {
		h.leftRun(d)
		return
	}
	if d == h.home() || d == filepath.Dir(d) {
		return
	}
	h.mkdirs(filepath.Dir(d))
	if err := os.Mkdir(d, 0o755); err == nil {
		os.Lchown(d, int(h.u.uid), int(h.u.gid))
	}
}

// leftRun makes run directory d (RunDir) as a local box that died
// without stopping leaves it (a stop removes it): the box user's, with
// whatever the user put there; the test removes it at its end.
func (h *hostile) leftRun(d string) {
	h.t.Helper()
	if err := mkdirRunBase(filepath.Dir(d)); err != nil {
		h.t.Fatal(err)
	}
	if err := os.Mkdir(d, 0o700); err == nil {
		os.Lchown(d, int(h.u.uid), int(h.u.gid))
	}
	h.t.Cleanup(func() { os.RemoveAll(d) })
}

// untouched fails the test unless the stand-in still holds its text, is
// root's and 0644, and rootDir holds nothing else (less the names in
// also, which the test made there itself).
func (h *hostile) untouched(also ...string) {
	h.t.Helper()
	fi, err := os.Lstat(h.standin)
	if err != nil {
		h.t.Fatalf("the stand-in: %v", err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if data, _ := os.ReadFile(h.standin); string(data) != standinText || st.Uid != 0 || fi.Mode().Perm() != 0o644 {
		h.t.Errorf("the root-owned stand-in changed: %q, uid %d, mode %v", data, st.Uid, fi.Mode())
	}
	h.unchangedDir(h.rootDir, append([]string{"standin"}, also...)...)
}

// unchangedDir fails the test unless d is still root's and holds exactly
// names.
func (h *hostile) unchangedDir(d string, names ...string) {
	h.t.Helper()
	fi, err := os.Lstat(d)
	if err != nil {
		h.t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 {
		h.t.Errorf("%s was given to uid %d", d, st.Uid)
	}
	ents, err := os.ReadDir(d)
	if err != nil {
		h.t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	slices.Sort(got)
	slices.Sort(names)
	if !slices.Equal(got, names) {
		h.t.Errorf("%s holds %q, want %q: something was made where only root writes", d, got, names)
	}
}

// listeningAgent is a stand-in cocoonbox-agent: it prints a line with a
// terminal sequence and a forged log line, as a hostile inbox could, makes
// its socket's directory and listens there until killed.
const listeningAgent = `#!/bin/sh
printf 'record repo=\033]52;c;QUFB\007 x\r\nforged line\n'
mkdir -p "$COCOONBOX_RUN_DIR/cocoonbox" || exit 1
exec python3 -c 'import os, socket, time
s = socket.socket(socket.AF_UNIX)
s.bind(os.environ["COCOONBOX_RUN_DIR"] + "/cocoonbox/offload.sock")
s.listen()
time.sleep(600)'
`

// The inbox's log was DIR/boxes/NAME/run/inbox.log, opened by root with
// O_CREATE|O_APPEND in the box user's run directory: a symlink there made
// root append the inbox's output (a record field the user wrote) to any
// file. Now the log is in the box's root-owned directory, opened with
// O_NOFOLLOW, and each line the inbox writes is escaped.
func TestHostileInboxLog(t *testing.T) {
	h := newHostile(t, listeningAgent)
	h.start()
	os.Remove(filepath.Join(h.run(), "inbox.log"))
	h.plant(filepath.Join(h.run(), "inbox.log"), h.standin)
	srv, _ := h.serve()
	b, _ := srv.reg.get("", DefaultBox)
	waitFor(t, "the inbox's first lines in its log", func() bool {
		data, _ := os.ReadFile(b.inboxLog())
		return strings.Contains(string(data), "forged line")
	})
	h.untouched()
	data, _ := os.ReadFile(b.inboxLog())
	if strings.ContainsAny(string(data), "\x1b\x07\r") || !strings.Contains(string(data), "record repo=?]52;c;QUFB? x?\n") {
		t.Errorf("the inbox's output reached the log unescaped:\n%q", data)
	}
	fi, err := os.Lstat(b.inboxLog())
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: uid %d mode %v, want root's 0600", b.inboxLog(), st.Uid, fi.Mode())
	}
}

// The inbox's output reaches root's disk, and the box user can write as
// much of it as it likes (pidfd_getfd takes the inbox's stdout, a
// process of its own): the log keeps at most maxInboxLog in inbox.log and
// as much in inbox.log.1, whatever comes. Before, 20 MB a second went to
// inbox.log, root's, until the disk (root's reserve too) was full.
func TestHostileInboxLogBounded(t *testing.T) {
	h := newHostile(t, `#!/bin/sh
yes 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef | head -c 8000000
echo last line
`+strings.TrimPrefix(listeningAgent, "#!/bin/sh\n"))
	srv, _ := h.serve()
	b, _ := srv.reg.get("", DefaultBox)
	waitFor(t, "the inbox's last line in its log", func() bool {
		data, _ := os.ReadFile(b.inboxLog())
		return strings.Contains(string(data), "last line\n")
	})
	var total int64
	for _, p := range []string{b.inboxLog(), b.inboxLog() + ".1"} {
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) && strings.HasSuffix(p, ".1") {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 || fi.Mode().Perm() != 0o600 || !fi.Mode().IsRegular() {
			t.Errorf("%s: uid %d mode %v, want root's 0600 file", p, st.Uid, fi.Mode())
		}
		total += fi.Size()
	}
	if max := int64(2*maxInboxLog + maxLogLine); total > max {
		t.Errorf("the inbox's 8 MB took %d bytes of the log, want at most %d", total, max)
	}
}

// A run directory whose cocoonbox/ is a link to a directory of root's:
// the server made cocoonbox/ (MkdirAll, Lchown) and removed a stale
// offload.sock there as root. Now only the inbox, as the box user, makes
// or removes anything in the run directory, and fails here.
func TestHostileRunDir(t *testing.T) {
	h := newHostile(t, listeningAgent)
	h.start()
	if err := os.WriteFile(filepath.Join(h.rootDir, "offload.sock"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(h.run(), "cocoonbox"))
	h.plant(filepath.Join(h.run(), "cocoonbox"), h.rootDir)
	h.plant(filepath.Join(h.run(), "tmux-0"), h.rootDir)
	srv, _ := h.serve()
	b, _ := srv.reg.get("", DefaultBox)
	waitFor(t, "the inbox to fail", func() bool {
		data, _ := os.ReadFile(b.inboxLog())
		return strings.Contains(string(data), "forged line")
	})
	time.Sleep(200 * time.Millisecond)
	h.untouched("offload.sock")
}

// A symlinked ~/.local: the server chowned home/.local/bin as root,
// following the link, so ~/.local -> /usr/local handed /usr/local/bin to
// the box user. Now the agent's link is made as the box user, which cannot
// write there.
func TestHostileLocal(t *testing.T) {
	h := newHostile(t, listeningAgent)
	h.start()
	usrLocal := filepath.Join(h.rootDir, "usrlocal")
	if err := os.MkdirAll(filepath.Join(usrLocal, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(h.home(), ".local")); err != nil {
		t.Fatal(err)
	}
	h.plant(filepath.Join(h.home(), ".local"), usrLocal)
	h.start()
	h.untouched("usrlocal")
	h.unchangedDir(usrLocal, "bin")
	h.unchangedDir(filepath.Join(usrLocal, "bin"))
}

// A hard link in the home to a root file (what a kernel without
// fs.protected_hardlinks lets any user make): the server Lchowned the
// skeleton files on every start, handing the linked file to the box user.
// Now it chowns only the box's three directories.
func TestHostileHardLink(t *testing.T) {
	h := newHostile(t, "")
	h.start()
	bashrc := filepath.Join(h.home(), ".bashrc")
	os.Remove(bashrc)
	if err := os.Link(h.standin, bashrc); err != nil {
		t.Fatal(err)
	}
	h.start()
	h.untouched()
}

// The home of a new box gets the skeleton's files as the box user's own,
// and the agent's link: the work the server now does through asUser is
// still done.
func TestPrepareHomeAsUser(t *testing.T) {
	h := newHostile(t, listeningAgent)
	h.start()
	for _, f := range []string{".profile", ".local/bin/cocoonbox-agent"} {
		fi, err := os.Lstat(filepath.Join(h.home(), f))
		if err != nil {
			if f == ".profile" {
				if _, err := os.Stat(filepath.Join(skelDir, ".profile")); err != nil {
					continue
				}
			}
			t.Fatalf("the new home lacks %s: %v", f, err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != h.u.uid {
			t.Errorf("%s is uid %d's, want the box user's (%d)", f, st.Uid, h.u.uid)
		}
	}
	if got, _ := os.Readlink(filepath.Join(h.home(), ".local/bin/cocoonbox-agent")); got != filepath.Join(h.bin, "cocoonbox-agent") {
		t.Errorf("the agent's link points to %q", got)
	}
}

// A symlinked ~/.terminfo and a raw Tty: installTerminfo did MkdirAll and
// WriteFile as root in the home, so ~/.terminfo/x -> a root directory (or
// a dangling link at the entry's own name) made root write the caller's
// bytes anywhere (/etc/sudoers.d). Now the entry is written as the box
// user; a name with a slash or a dot-dot is refused before anything runs.
func TestHostileTerminfo(t *testing.T) {
	h := newHostile(t, "")
	h.start()
	h.plant(filepath.Join(h.home(), ".terminfo", "x"), h.rootDir)
	h.plant(filepath.Join(h.home(), ".terminfo", "78"), h.rootDir)
	h.plant(filepath.Join(h.home(), ".terminfo", "v", "vt100"), filepath.Join(h.rootDir, "made-by-vt100"))
	_, sock := h.serve()
	tok, err := IssueToken(h.state, "test", "test")
	if err != nil {
		t.Fatal(err)
	}
	entry := []byte("root2::0:0::/root:/bin/bash\n")
	for _, term := range []string{"xterm-256color", "vt100", "../../x", "/x", "x/../../y"} {
		if code := rawExec(t, sock, tok, &controlv1.Start{Box: DefaultBox, Command: "true", Tty: &controlv1.Tty{Term: term, Terminfo: entry, Rows: 24, Cols: 80}}); code != 0 {
			t.Errorf("TERM=%s: exit %d, want 0 (the command runs; only the entry is not written)", term, code)
		}
	}
	h.untouched()
	// The entry still lands where the home is the user's own.
	if code := rawExec(t, sock, tok, &controlv1.Start{Box: DefaultBox, Command: "true", Tty: &controlv1.Tty{Term: "screen", Terminfo: entry, Rows: 24, Cols: 80}}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	fi, err := os.Lstat(filepath.Join(h.home(), ".terminfo", "s", "screen"))
	if err != nil {
		t.Fatalf("a plain terminfo entry was not installed: %v", err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != h.u.uid {
		t.Errorf("the entry is uid %d's, want the box user's", st.Uid)
	}
}

// A working directory the box user may not enter is refused as the box
// user finds it, not looked at by root.
func TestHostileWorkDir(t *testing.T) {
	h := newHostile(t, "")
	closed := filepath.Join(h.rootDir, "closed")
	if err := os.Mkdir(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	_, sock := h.serve()
	tok, err := IssueToken(h.state, "test", "test")
	if err != nil {
		t.Fatal(err)
	}
	err = rawExecErr(t, sock, tok, &controlv1.Start{Box: DefaultBox, Command: "true", Dir: closed})
	if err == nil || !strings.Contains(err.Error(), "working directory "+closed+" is closed to the user of box main") {
		t.Errorf("a directory closed to the box user: %v", err)
	}
	err = rawExecErr(t, sock, tok, &controlv1.Start{Box: DefaultBox, Command: "true", Dir: "no/such"})
	if err == nil || !strings.Contains(err.Error(), "working directory no/such does not exist in box main") {
		t.Errorf("a missing directory: %v", err)
	}
}

// rawExec runs start in the box over a raw gRPC client (no cocoonbox
// client in between), closes stdin and returns the exit code.
func rawExec(t *testing.T, sock, tok string, start *controlv1.Start) int32 {
	t.Helper()
	code, err := rawExecCode(t, sock, tok, start)
	if err != nil {
		t.Fatal(err)
	}
	return code
}

func rawExecErr(t *testing.T, sock, tok string, start *controlv1.Start) error {
	t.Helper()
	_, err := rawExecCode(t, sock, tok, start)
	return err
}

func rawExecCode(t *testing.T, sock, tok string, start *controlv1.Start) (int32, error) {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
	st, err := controlv1.NewSessionClient(conn).Exec(ctx)
	if err != nil {
		return 0, err
	}
	if err := st.Send(&controlv1.ExecRequest{Msg: &controlv1.ExecRequest_Start{Start: start}}); err != nil {
		return 0, err
	}
	st.Send(&controlv1.ExecRequest{Msg: &controlv1.ExecRequest_CloseStdin{CloseStdin: &controlv1.CloseStdin{}}})
	for {
		m, err := st.Recv()
		if err == io.EOF {
			return 0, io.ErrUnexpectedEOF
		}
		if err != nil {
			return 0, err
		}
		if e := m.GetExit(); e != nil {
			return e.GetCode(), nil
		}
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("waited 10 s for %s", what)
}

// A run directory that is itself a link (left by an older layout, or by
// anyone who could write the box's directory): the server refuses to
// start in one line naming it, and hands nothing over.
func TestHostileRunDirLink(t *testing.T) {
	h := newHostile(t, "")
	h.start()
	if err := os.RemoveAll(h.run()); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(h.rootDir, h.run()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(h.run()) })
	srv := &Server{Dir: h.state, BinDir: h.bin, User: DefaultUser}
	err := srv.CreateBox(DefaultBox)
	if err == nil || !strings.Contains(err.Error(), h.run()+" is no directory (a symbolic link); move it away and start again") {
		t.Errorf("a linked run directory: %v", err)
	}
	h.untouched()
}

// A state directory under a directory the box user owns (sudo with the
// box user's HOME: ~/.local/state/cocoonbox/localbox) is refused: the box
// user could move the state away and put its own in its place, with
// boxes/main a link to a directory of root's, whose home/ and run/ the
// next start would chown to it (/ for the link: /home and /run).
func TestHostileStateParent(t *testing.T) {
	h := newHostile(t, "")
	top := filepath.Join(filepath.Dir(h.state), "userhome")
	if err := os.Mkdir(top, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chown(top, int(h.u.uid), int(h.u.gid))
	state := filepath.Join(top, "cocoonbox", "localbox")
	// What the box user puts in place of the state the local box made.
	boxes := filepath.Join(state, "boxes")
	if err := os.MkdirAll(boxes, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(top, "cocoonbox"), state, boxes} {
		os.Chown(d, int(h.u.uid), int(h.u.gid))
	}
	for _, d := range []string{"home", "run"} {
		if err := os.Mkdir(filepath.Join(h.rootDir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(h.rootDir, filepath.Join(boxes, DefaultBox)); err != nil {
		t.Fatal(err)
	}
	os.Lchown(filepath.Join(boxes, DefaultBox), int(h.u.uid), int(h.u.gid))
	if err := MkdirState(state); err == nil || !strings.Contains(err.Error(), "which a user other than root can change") {
		t.Errorf("MkdirState of a state directory under the box user's: %v", err)
	}
	srv := &Server{Dir: state, BinDir: h.bin, User: DefaultUser, Logf: t.Logf}
	if err := srv.CreateBox(DefaultBox); err == nil {
		srv.Stop()
		t.Error("a server started on a state directory under the box user's")
	}
	for _, d := range []string{h.rootDir, filepath.Join(h.rootDir, "home"), filepath.Join(h.rootDir, "run")} {
		fi, err := os.Lstat(d)
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s is now %04o, uid %d", d, fi.Mode().Perm(), st.Uid)
		}
	}
	h.untouched("home", "run")
}

// A box user may answer tmux on its own socket and never reply, so that
// each box's `tmux kill-server` takes its whole 5 s: a start (which ends
// the tmux servers a previous local box left) ends them all at once, not
// one box after another (three boxes held a real start past `localbox
// start`'s 15 s, and a stop past `localbox stop`'s 10 s).
func TestHostileTmuxAllAtOnce(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is missing: scripts/deps.sh installs it")
	}
	h := newHostile(t, "")
	names := []string{"t1", "t2", "t3", "t4"}
	first := &Server{Dir: h.state, BinDir: h.bin, User: DefaultUser, Logf: t.Logf}
	for _, n := range names {
		if err := first.CreateBox(n); err != nil {
			t.Fatal(err)
		}
	}
	first.Stop()
	var lis []net.Listener
	defer func() {
		for _, l := range lis {
			l.Close()
		}
	}()
	for _, n := range names {
		run := RunDir(filepath.Join(h.state, "boxes", n))
		h.leftRun(run)
		d := filepath.Join(run, "tmux-"+strconv.Itoa(int(h.u.uid)))
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		os.Lchown(d, int(h.u.uid), int(h.u.gid))
		sock := filepath.Join(d, "default")
		l, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		os.Lchown(sock, int(h.u.uid), int(h.u.gid))
		lis = append(lis, l)
		go func() {
			var held []net.Conn
			for {
				c, err := l.Accept()
				if err != nil {
					for _, c := range held {
						c.Close()
					}
					return
				}
				held = append(held, c) // and never a word
			}
		}()
	}
	srv := &Server{Dir: h.state, BinDir: h.bin, User: DefaultUser, Logf: t.Logf}
	start := time.Now()
	if err := srv.CreateBox(DefaultBox); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	for _, l := range lis {
		l.Close()
	}
	srv.Stop()
	if took > 9*time.Second {
		t.Errorf("the start took %v with %d boxes whose tmux never answers: one box after another", took.Round(time.Second), len(names))
	}
}

// Binaries the box user could replace (sudo ~user/go/bin/cocoonbox): root
// would run the box user's program at the next start. CheckBinOwner
// refuses a binary in a directory the box user owns, and one that others
// may write, and takes root's own.
func TestHostileBinaries(t *testing.T) {
	h := newHostile(t, "")
	theirs := filepath.Join(h.rootDir, "theirs")
	if err := os.Mkdir(theirs, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Lchown(theirs, int(h.u.uid), int(h.u.gid))
	for _, d := range []string{theirs, h.rootDir} {
		if err := os.WriteFile(filepath.Join(d, "cocoonbox"), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := CheckBinOwner(filepath.Join(theirs, "cocoonbox")); err == nil || !strings.Contains(err.Error(), "is under "+theirs+" (0755, user's), which a user other than root can change") {
		t.Errorf("a binary in the box user's directory: %v", err)
	}
	os.Chmod(filepath.Join(h.rootDir, "cocoonbox"), 0o757)
	if err := CheckBinOwner(filepath.Join(h.rootDir, "cocoonbox")); err == nil || !strings.Contains(err.Error(), "cocoonbox (0757, root's), which a user other than root can change") {
		t.Errorf("a binary others may write: %v", err)
	}
	os.Chmod(filepath.Join(h.rootDir, "cocoonbox"), 0o755)
	if err := CheckBinOwner(filepath.Join(h.rootDir, "cocoonbox")); err != nil {
		t.Errorf("root's own binary: %v", err)
	}
}

// A state directory behind a link in a directory the box user owns (sudo
// with its HOME: ~/.local -> a directory of root's, or of anyone's):
// MkdirState made the missing directories through the link as root and
// only then refused, and a Server made DIR/boxes before it looked. Now
// nothing is made: the directory that exists is checked first. In a
// sticky directory (/tmp), where anyone may put a link at the name first,
// the link is refused as well.
func TestHostileStateLink(t *testing.T) {
	h := newHostile(t, "")
	top := filepath.Join(filepath.Dir(h.state), "userhome")
	if err := os.Mkdir(top, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chown(top, int(h.u.uid), int(h.u.gid))
	link := filepath.Join(top, ".local")
	if err := os.Symlink(h.rootDir, link); err != nil {
		t.Fatal(err)
	}
	os.Lchown(link, int(h.u.uid), int(h.u.gid))
	state := filepath.Join(link, "state", "cocoonbox", "localbox")
	if err := MkdirState(state); err == nil || !strings.Contains(err.Error(), "which a user other than root can change") {
		t.Errorf("MkdirState behind the box user's link: %v", err)
	}
	for _, user := range []string{DefaultUser, ""} {
		srv := &Server{Dir: state, BinDir: h.bin, User: user, Logf: t.Logf}
		if err := srv.CreateBox(DefaultBox); err == nil || !strings.Contains(err.Error(), "which a user other than root can change") {
			t.Errorf("a server (box user %q) on a state directory behind the box user's link: %v", user, err)
		}
		srv.Stop()
	}
	h.untouched()

	sticky := filepath.Join(filepath.Dir(h.state), "sticky")
	if err := os.Mkdir(sticky, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(sticky, 0o777|os.ModeSticky)
	planted := filepath.Join(sticky, "cocoonbox")
	if err := os.Symlink(h.rootDir, planted); err != nil {
		t.Fatal(err)
	}
	os.Lchown(planted, int(h.u.uid), int(h.u.gid))
	if err := MkdirState(filepath.Join(planted, "localbox")); err == nil || !strings.Contains(err.Error(), "which a user other than root can change") {
		t.Errorf("MkdirState through the box user's link in a sticky directory: %v", err)
	}
	h.untouched()
}

// Anyone may put the marker of a local box's state in their own
// processes' environment; a start (which ends the box processes a dead
// server left, found by the marker) ended every such process, root's
// included. Now only the box users' processes are looked at: root's, and
// another user's, stay.
func TestHostileMarkerOthers(t *testing.T) {
	h := newHostile(t, "")
	h.start()
	marked := func(uid uint32) *exec.Cmd {
		cmd := exec.Command("sleep", "600")
		cmd.Env = []string{markerVar + "=" + h.state}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	others := []*exec.Cmd{marked(0), marked(nobody.uid)}
	box := marked(h.u.uid)
	exitedOf := func(cmd *exec.Cmd) bool { return exited(cmd.Process.Pid) }
	h.start()
	waitFor(t, "the box user's marked process to end", func() bool { return exitedOf(box) })
	for _, cmd := range others {
		if exitedOf(cmd) {
			t.Errorf("a start ended pid %d, uid %d, no box user's, for the marker in its environment", cmd.Process.Pid, cmd.SysProcAttr.Credential.Uid)
		}
	}
}

// A crafted session record read by the real cocoonbox-agent: its repo
// holds a newline and a passwd line. The inbox logged record fields
// unescaped, and the server appended its output as root to run/inbox.log,
// which the box user had made a link to a root file (/etc/passwd): at the
// next start a passwd line of the box user's choosing. Now the agent
// escapes every line it logs, the server escapes what it copies, and
// the log is root's file in root's directory: the line comes out whole,
// on one line, and no root file changes.
func TestHostileAgentRecord(t *testing.T) {
	h := newHostile(t, "")
	agent := filepath.Join(h.bin, "cocoonbox-agent")
	if out, err := exec.Command("go", "build", "-o", agent, "../cmd/cocoonbox-agent").CombinedOutput(); err != nil {
		t.Fatalf("build cocoonbox-agent: %v\n%s", err, out)
	}
	h.start()
	crafted := "x\nroot2::0:0::/root:/bin/bash\n#"
	rec := filepath.Join(h.home(), ".local", "share", "cocoonbox", "offload", "k1", "session.json")
	h.mkdirs(filepath.Dir(rec))
	data := `{"repo": ` + strconv.Quote(crafted) + `, "name": "x", "cli": "claude", "started": true, "status": "working", "inbox_seq": 0, "outbox_seq": 0}`
	if err := os.WriteFile(rec, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Lchown(rec, int(h.u.uid), int(h.u.gid))
	os.Remove(filepath.Join(h.run(), "inbox.log"))
	h.plant(filepath.Join(h.run(), "inbox.log"), h.standin)

	srv, _ := h.serve()
	b, _ := srv.reg.get("", DefaultBox)
	var log string
	waitFor(t, "the inbox's restart check in its log", func() bool {
		data, _ := os.ReadFile(b.inboxLog())
		log = string(data)
		return strings.Contains(log, "restart check: ")
	})
	if !strings.Contains(log, "restart check: x?root2::0:0::/root:/bin/bash?#'s session is gone") {
		t.Errorf("the crafted repo did not reach the log escaped on one line:\n%s", log)
	}
	for _, l := range strings.Split(log, "\n") {
		if strings.HasPrefix(l, "root2:") || strings.HasPrefix(l, "#") {
			t.Errorf("the crafted record forged a line of the log: %q", l)
		}
	}
	h.untouched()
	// Other packages' tests add and remove users meanwhile: look for the
	// forged line, not for an unchanged file.
	if now, _ := os.ReadFile("/etc/passwd"); strings.Contains("\n"+string(now), "\nroot2:") {
		t.Errorf("the crafted record wrote a line to /etc/passwd")
	}
}

// A server run by root with no box user (only a test's can be) runs box
// commands as root; deleting a box then removed its tree with rm -rf as
// root. Now it removes nothing and says so.
func TestDeleteNoBoxUser(t *testing.T) {
	h := newHostile(t, "")
	srv := &Server{Dir: h.state, BinDir: h.bin, Logf: t.Logf}
	if err := srv.CreateBox("gone"); err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	b, _ := srv.reg.get("", "gone")
	if err := os.WriteFile(filepath.Join(b.workspace(), "kept"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := srv.deleteBox(b); err == nil || !strings.Contains(err.Error(), "root removes no box's files as itself") {
		t.Errorf("deleting a box with no box user, as root: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(b.workspace(), "kept")); err != nil {
		t.Errorf("root removed the box's files as itself: %v", err)
	}
}

// mkdirOwn makes a missing directory with its mode, takes one that is
// there, and refuses a symbolic link (to a directory, too) or a file in
// its place, naming what is there and the fix, changing nothing.
func TestMkdirOwn(t *testing.T) {
	dir := t.TempDir()
	d := filepath.Join(dir, "d")
	if err := mkdirOwn(d, 0o711); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(d); err != nil || !fi.IsDir() || fi.Mode().Perm()&^0o711 != 0 {
		t.Fatalf("made %v, %v", fi, err)
	}
	if err := mkdirOwn(d, 0o711); err != nil {
		t.Fatalf("again: %v", err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(d, link); err != nil {
		t.Fatal(err)
	}
	if err := mkdirOwn(link, 0o711); err == nil || err.Error() != link+" is no directory (a symbolic link); move it away and start again" {
		t.Errorf("a link: %v", err)
	}
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o600)
	if err := mkdirOwn(file, 0o711); err == nil || !strings.Contains(err.Error(), file+" is no directory") {
		t.Errorf("a file: %v", err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link changed: %v, %v", fi, err)
	}
}
