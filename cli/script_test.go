package cli_test

import (
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/cocoonbox/cocoonbox/auth"
	"github.com/cocoonbox/cocoonbox/boxsession"
	"github.com/cocoonbox/cocoonbox/cli"
	"github.com/cocoonbox/cocoonbox/localbox"
)

func TestMain(m *testing.M) {
	cmds := map[string]func(){
		"cocoonbox":            func() { os.Exit(cli.Cocoonbox(os.Args[1:], cli.SystemEnv(), cli.System())) },
		"cocoonbox-ssh":        func() { os.Exit(cli.SSH(os.Args[1:], cli.SystemEnv(), cli.System())) },
		"git-remote-cocoonbox": func() { os.Exit(cli.GitRemote(os.Args[1:], cli.SystemEnv(), cli.System())) },
		"cocoonbox-agent":      func() { os.Exit(cli.Agent(os.Args[1:], cli.SystemEnv(), cli.System())) },
		"cocoonbox-session": func() {
			p := boxsession.Program{Name: "cocoonbox-session", HolderArgs: []string{"holder"}}
			os.Exit(boxsession.Main(p, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
		},
		"exitcode":    exitcode,
		"randbytes":   randbytes,
		"fakehistory": fakehistory,
		"waitfile":    waitfile,
		"waitlog":     waitlog,
		"killmaster":  killmaster,
		"masterfds":   masterfds,
		"browse":      browse,
		"formbrowse":  formbrowse,
		"mktree":      mktree,
		"pace":        pace,
		"blackhole":   blackhole,
		"pasteback":   pasteback,
	}
	if cmds[strings.TrimSuffix(filepath.Base(os.Args[0]), ".exe")] == nil {
		takeIgnoredSignals()
		engineSlot()
	}
	testscript.Main(m, cmds)
}

// engineSlot gives the package one more of go test's -parallel slots
// than its default (GOMAXPROCS) when TestEngineScripts runs, unless
// -parallel was given: that test holds a slot for as long as its own pool
// of scripts runs (minutes), so the other parallel tests would otherwise
// run one at a time on two cores beside it.
func engineSlot() {
	if os.Getenv("COCOONBOX_TEST_ENGINE") == "" || slices.ContainsFunc(os.Args[1:], func(a string) bool {
		return strings.HasPrefix(a, "-test.parallel") || strings.HasPrefix(a, "--test.parallel")
	}) {
		return
	}
	flag.Set("test.parallel", strconv.Itoa(runtime.GOMAXPROCS(0)+1))
}

// takeIgnoredSignals: a test binary started with INT, QUIT or HUP ignored
// (a background job of a non-interactive shell has INT and QUIT ignored,
// nohup HUP) passes that on to every program its tests start, as an
// ignored signal survives exec; the signal tests then find their
// cocoonbox-ssh deaf to INT, as ssh would be, and hang. So the test binary
// takes those signals itself, and drops them as it was told to: a handled
// signal is reset to its default at exec, so its children start as from a
// terminal. The commands above, the same binary run by the tests, keep
// what they are given (TestSSHIgnoredSignalStaysIgnored starts one with
// HUP ignored).
func takeIgnoredSignals() {
	var sigs []os.Signal
	for _, s := range []os.Signal{syscall.SIGINT, syscall.SIGQUIT, syscall.SIGHUP} {
		if signal.Ignored(s) {
			sigs = append(sigs, s)
		}
	}
	if len(sigs) == 0 {
		return
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	go func() {
		for range ch {
		}
	}()
}

// exitcode N CMD ARGS... runs CMD with this process's stdio and succeeds
// only if it exits with status N.
func exitcode() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: exitcode N CMD [ARGS...]")
		os.Exit(2)
	}
	want, err := strconv.Atoi(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "exitcode: bad N:", err)
		os.Exit(2)
	}
	c := exec.Command(os.Args[2], os.Args[3:]...)
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	err = c.Run()
	got := c.ProcessState.ExitCode()
	if err != nil && c.ProcessState == nil {
		fmt.Fprintln(os.Stderr, "exitcode:", err)
		os.Exit(2)
	}
	if got != want {
		fmt.Fprintf(os.Stderr, "exitcode: %s exited %d, want %d\n", os.Args[2], got, want)
		os.Exit(1)
	}
}

// randbytes N FILE writes N random bytes to FILE.
func randbytes() {
	n, err := strconv.Atoi(os.Args[1])
	if err != nil || len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: randbytes N FILE")
		os.Exit(2)
	}
	b := make([]byte, n)
	rand.Read(b)
	if err := os.WriteFile(os.Args[2], b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// pace RATE copies stdin to stdout at RATE bytes a second at most, each
// read passed on at once, so that a transfer through it spans a known
// time whatever the link: a box command's pipe (git-upload-pack "$@" |
// pace 2000000). Not head -c in the pipe: GNU head writes
// through stdio, which holds a short message (upload-pack's first
// pkt-lines) while git waits for it, and the clone hangs with or without
// cuts.
func pace() {
	rate, err := strconv.Atoi(os.Args[len(os.Args)-1])
	if err != nil || len(os.Args) != 2 || rate <= 0 {
		fmt.Fprintln(os.Stderr, "usage: pace BYTES_PER_SECOND")
		os.Exit(2)
	}
	buf := make([]byte, 32<<10)
	start := time.Now()
	var sent int64
	for {
		n, err := os.Stdin.Read(buf)
		if n > 0 {
			if _, err := os.Stdout.Write(buf[:n]); err != nil {
				fmt.Fprintln(os.Stderr, "pace:", err)
				os.Exit(1)
			}
			sent += int64(n)
			time.Sleep(time.Duration(sent)*time.Second/time.Duration(rate) - time.Since(start))
		}
		if err == io.EOF {
			return
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "pace:", err)
			os.Exit(1)
		}
	}
}

// mktree N DIR writes N small files under DIR, in 100 directories, with
// spaces and non-ASCII letters in their names and distinct contents.
func mktree() {
	n, err := strconv.Atoi(os.Args[1])
	if err != nil || len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: mktree N DIR")
		os.Exit(2)
	}
	for i := range n {
		dir := filepath.Join(os.Args[2], fmt.Sprintf("dir %02d ñ", i%100))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		name := filepath.Join(dir, fmt.Sprintf("file %05d – été ✓.txt", i))
		if err := os.WriteFile(name, []byte(fmt.Sprintf("file %d\n", i)), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

// private DIR... fails naming every file and directory under each DIR
// (DIR itself included) that group or others may read, write or search:
// what the laptop side writes in its state, data and configuration
// directories is 0600, and their directories 0700. Links are skipped
// (their own mode means nothing); a DIR that does not exist fails.
func private(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: private DIR...")
	}
	var open []string
	for _, dir := range args {
		root := ts.MkAbs(dir)
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			// Another script's socket or lock may go meanwhile.
			if errors.Is(err, fs.ErrNotExist) && p != root {
				return nil
			}
			if err != nil {
				return err
			}
			fi, err := d.Info()
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			if fi.Mode()&fs.ModeSymlink == 0 && fi.Mode().Perm()&0o077 != 0 {
				open = append(open, fmt.Sprintf("%s %s", fi.Mode(), p))
			}
			return nil
		})
		ts.Check(err)
	}
	if len(open) > 0 {
		ts.Fatalf("group or others may reach:\n%s", strings.Join(open, "\n"))
	}
}

// boxown PATH... gives each PATH, and what is under it, to the box user
// when the script's local box runs box commands as it (the test runs as
// root), as if the box user had made them: what a script puts in a box's
// home or workspace from outside (a stand-in CLI, a profile) is then the
// box user's to change. Links are given, not followed.
func boxown(ts *testscript.TestScript, neg bool, args []string) {
	if os.Geteuid() != 0 {
		if neg || len(args) == 0 {
			ts.Fatalf("usage: boxown PATH...")
		}
		return
	}
	u, err := user.Lookup(localbox.DefaultUser)
	ts.Check(err)
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	chownAll(ts, neg, args, uid, gid)
}

// chownAll is boxown's work: each of args, and what is under it, to
// uid:gid, links given, not followed.
func chownAll(ts *testscript.TestScript, neg bool, args []string, uid, gid int) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: boxown PATH...")
	}
	for _, a := range args {
		ts.Check(filepath.WalkDir(ts.MkAbs(a), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, uid, gid)
		}))
	}
}

// boxdir BOX home|workspace|run VAR sets $VAR to where the script reaches
// box BOX's home, workspace or run directory from this machine (on the
// process engine, the state directory's; TestEngineScripts has its own).
func boxdir(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: boxdir BOX home|workspace|run VAR")
	}
	dir := filepath.Join(ts.Getenv("BOX_STATE"), "boxes", args[0])
	switch args[1] {
	case "home", "workspace":
		dir = filepath.Join(dir, args[1])
	case "run":
		dir = localbox.RunDir(dir)
	default:
		ts.Fatalf("usage: boxdir BOX home|workspace|run VAR")
	}
	ts.Setenv(args[2], dir)
}

// openToBoxUser lets others search (not list) each of dirs, so that the
// box user reaches what is below them.
func openToBoxUser(dirs ...string) error {
	for _, d := range dirs {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if err := os.Chmod(d, fi.Mode().Perm()|0o711); err != nil {
			return err
		}
	}
	return nil
}

func TestScripts(t *testing.T) {
	testscript.Run(t, params(t, "testdata/script"))
}

// params runs each script in dir against its own local box, served from
// this process on loopback TCP, with HOME and git's config inside $WORK.
func params(t *testing.T, dir string) testscript.Params { return paramsWith(t, dir, nil) }

// paramsWith is params with a hook that sets up the script's local box
// server before it serves (before, too, when not nil, runs first).
func paramsWith(t *testing.T, dir string, before func(e *testscript.Env, srv *localbox.Server) error) testscript.Params {
	bin, err := exec.LookPath("cocoonbox")
	if err != nil {
		t.Fatal(err)
	}
	standin, err := filepath.Abs("testdata/standin/standin-cli")
	if err != nil {
		t.Fatal(err)
	}
	ca := newTestCA(t)
	// The scripts' work directories go under a root of our own, removed
	// whole when the test and all its scripts are done: testscript removes
	// its own root only with the last script's work directory, and left
	// one behind on every full run (empty, or holding what a CLI wrote
	// after its script ended).
	root, err := os.MkdirTemp(os.Getenv("GOTMPDIR"), "go-test-script")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	return testscript.Params{
		Dir:                 dir,
		WorkdirRoot:         root,
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Condition: func(cond string) (bool, error) {
			if cond == "root" {
				return os.Geteuid() == 0, nil
			}
			if cond == "hidepid" {
				return localbox.ProcHidesOthers(), nil
			}
			// [container]: the script's box is a container (TestEngineScripts),
			// not a host directory of the process engine.
			if cond == "container" {
				return false, nil
			}
			if p, ok := strings.CutPrefix(cond, "exists:"); ok {
				_, err := os.Stat(p)
				return err == nil, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Cmds: map[string]func(*testscript.TestScript, bool, []string){
			"mkcert":     ca.mkcert,
			"tlsbox":     tlsbox,
			"private":    private,
			"stdoutvar":  stdoutvar,
			"boxown":     boxown,
			"faultproxy": faultproxyCmd,
			"boxdir":     boxdir,
		},
		Setup: func(e *testscript.Env) error {
			home := filepath.Join(e.WorkDir, "home")
			state := filepath.Join(e.WorkDir, ".box")
			if err := os.MkdirAll(home, 0o700); err != nil {
				return err
			}
			// Served by root, a local box a script starts itself runs box
			// commands as the box user, never as root: it must reach the
			// state directory under HOME and our binaries.
			if os.Geteuid() == 0 {
				if err := openToBoxUser(filepath.Dir(e.WorkDir), e.WorkDir, home, filepath.Dir(filepath.Dir(bin)), filepath.Dir(bin)); err != nil {
					return err
				}
			}
			gitconfig := "[user]\n\tname = Test\n\temail = test@example.com\n[init]\n\tdefaultBranch = main\n"
			if os.Geteuid() == 0 {
				// The script (root) reads the box's repositories, which
				// are the box user's.
				gitconfig += "[safe]\n\tdirectory = *\n"
			}
			if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte(gitconfig), 0o644); err != nil {
				return err
			}
			srv := &localbox.Server{Dir: state, BinDir: filepath.Dir(bin)}
			// The engine of the script's box, for a local box the script
			// starts itself (TestEngineScripts' hook sets its own).
			e.Setenv("ENGINE", localbox.EngineProcess)
			// Served by root, box commands run as the box user, as
			// `localbox start` run by root has them: never as root.
			if os.Geteuid() == 0 {
				srv.User = localbox.DefaultUser
			}
			if before != nil {
				if err := before(e, srv); err != nil {
					return err
				}
				// Serve's own start would drop the error.
				if err := srv.CreateBox(localbox.DefaultBox); err != nil {
					return err
				}
			}
			var lis net.Listener
			var url string
			// A script named *_tls gets its local box over TLS.
			if strings.HasSuffix(filepath.Base(e.WorkDir), "_tls") {
				if srv.TLS, err = ca.tlsServer(e); err != nil {
					return err
				}
				lis, url, err = localbox.ListenTLS("127.0.0.1:0", "")
			} else {
				lis, url, err = localbox.Listen(state, "127.0.0.1:0")
			}
			if err != nil {
				return err
			}
			tok, err := localbox.IssueToken(state, "test", auth.ClientID)
			if err != nil {
				return err
			}
			go srv.Serve(lis)
			e.Defer(srv.Stop)
			// A script that starts a local box of its own under HOME and
			// fails before its `localbox stop` would leave it running.
			e.Defer(func() {
				stop := exec.Command(bin, "localbox", "stop")
				stop.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
				stop.Run()
				// One started with its own XDG_STATE_HOME is not found by
				// that stop: end what still runs with this HOME (seen: local
				// boxes of failed scripts serving hours later).
				endServersOf(home)
			})
			_, port, _ := net.SplitHostPort(lis.Addr().String())
			e.Setenv("HOME", home)
			e.Setenv("XDG_CONFIG_HOME", "")
			e.Setenv("XDG_STATE_HOME", "")
			e.Setenv("XDG_DATA_HOME", "")
			e.Setenv("GIT_CONFIG_NOSYSTEM", "1")
			e.Setenv("COCOONBOX_ENDPOINT", url)
			e.Setenv("COCOONBOX_TOKEN", tok)
			e.Setenv("BOX_PORT", port)
			e.Setenv("BOX_STATE", state)
			e.Setenv("BOX_WORKSPACE", filepath.Join(state, "boxes", localbox.DefaultBox, "workspace"))
			e.Setenv("BOX_HOME", filepath.Join(state, "boxes", localbox.DefaultBox, "home"))
			e.Setenv("BOX_RUN", localbox.RunDir(filepath.Join(state, "boxes", localbox.DefaultBox)))
			// As the box's own commands name them: the same directories
			// on the process engine.
			e.Setenv("GUEST_WORKSPACE", e.Getenv("BOX_WORKSPACE"))
			e.Setenv("GUEST_HOME", e.Getenv("BOX_HOME"))
			e.Setenv("GUEST_RUN", e.Getenv("BOX_RUN"))
			e.Setenv("STANDIN", standin)
			// Each script claims Unix users in a claims directory of its own
			// (root's, 0700), so scripts in parallel never see each other's.
			e.Setenv("COCOONBOX_CLAIMS_DIR", filepath.Join(e.WorkDir, ".claims"))
			// UNIQ names what a script makes machine-wide (Unix users), so
			// that no two runs collide.
			uniq := make([]byte, 3)
			rand.Read(uniq)
			e.Setenv("UNIQ", fmt.Sprintf("%x", uniq))
			e.Defer(func() { deleteUsers(fmt.Sprintf("cb%x-", uniq)) })
			return nil
		},
	}
}

// endServersOf ends (SIGTERM, then SIGKILL after 10 s) every `cocoonbox
// localbox serve` whose HOME is home, found through /proc (Linux; elsewhere
// it finds none).
func endServersOf(home string) {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		args, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		env, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if strings.Contains(string(args), "localbox\x00serve") && slices.Contains(strings.Split(string(env), "\x00"), "HOME="+home) {
			pids = append(pids, pid)
		}
	}
	signal := func(pid int, sig os.Signal) error {
		p, err := os.FindProcess(pid)
		if err != nil {
			return err
		}
		return p.Signal(sig)
	}
	for _, pid := range pids {
		signal(pid, syscall.SIGTERM)
	}
	for deadline := time.Now().Add(10 * time.Second); len(pids) > 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		pids = slices.DeleteFunc(pids, func(pid int) bool { return signal(pid, syscall.Signal(0)) != nil })
	}
	for _, pid := range pids {
		signal(pid, os.Kill)
	}
}

// deleteUsers deletes every Unix user whose name starts with prefix, and
// ends its processes first: a script that failed before its `account
// remove` leaves the users it made.
func deleteUsers(prefix string) {
	if os.Geteuid() != 0 {
		return
	}
	pw, _ := os.ReadFile("/etc/passwd")
	for _, l := range strings.Split(string(pw), "\n") {
		if name, _, ok := strings.Cut(l, ":"); ok && strings.HasPrefix(name, prefix) {
			exec.Command("pkill", "-KILL", "-u", name).Run()
			exec.Command("userdel", name).Run()
		}
	}
}
