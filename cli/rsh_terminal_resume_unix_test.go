//go:build linux || darwin

package cli_test

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/faultproxy"
	"github.com/cocoonbox/cocoonbox/localbox"
)

// resumeEnv is ttyEnv(b) with resumable sessions on, through proxy p
// when not nil.
func resumeEnv(b *testBox, p *faultproxy.Proxy, extra ...string) []string {
	env := append(ttyEnv(b), "COCOONBOX_RESUME=on")
	if p != nil {
		env = append(env, "COCOONBOX_ENDPOINT=http://"+p.Addr(), "COCOONBOX_KEEPALIVE=10s,1s")
	}
	return append(env, extra...)
}

// cutProxy is a fault proxy in front of box b, closed when t ends: the
// link resumeEnv(b, fp) sends clients through.
func cutProxy(t *testing.T, b *testBox) *faultproxy.Proxy {
	t.Helper()
	fp, err := faultproxy.Listen("127.0.0.1:0", b.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fp.Close() })
	return fp
}

// TestRshTerminalResumes: `rsh -t` on a terminal through a network
// change (an outage: every connection reset, new ones refused for 2 s)
// and through a sleep (a freeze the keepalive gives up on), and on a box
// that ends each stream at 2 s (localbox --max-stream), goes on where
// it was: the terminal shows the one reconnecting line, every line the
// box wrote meanwhile arrives once and in order, what was typed and the
// window change made while cut off reach the box, the exit code comes
// through and the terminal's termios is restored.
func TestRshTerminalResumes(t *testing.T) {
	t.Parallel()
	for _, fault := range []string{"outage", "freeze", "max-stream"} {
		t.Run(fault, func(t *testing.T) {
			t.Parallel()
			var b *testBox
			if fault == "max-stream" {
				// The box ends every stream 2 s old, as the service's
				// front end does at an hour: the loop below spans a cut.
				b = startBox(t, func(s *localbox.Server) { s.MaxStream = 2 * time.Second })
			} else {
				b = startBox(t)
			}
			fp := cutProxy(t, b)
			p := startProgOnPTY(t, "cocoonbox", resumeEnv(b, fp), "rsh", "-t", "main",
				`stty size; echo READY; read a; i=0; while [ $i -lt 40 ]; do i=$((i+1)); echo line$i; sleep 0.1; done; read b; stty size; echo "got:$a:$b"; exit 7`)
			p.waitFor("24 80\r\n")
			p.waitFor("READY")
			p.write("go\r")
			p.waitFor("line1\r\n")
			switch fault {
			case "outage":
				fp.Outage(2 * time.Second)
			case "freeze":
				fp.Freeze(12 * time.Second)
			}
			// Through --max-stream the resume may be done before the
			// resize and the typing: they then go on the new stream.
			p.waitFor("cocoonbox: connection to main lost; reconnecting")
			p.resize(30, 100)
			p.write("second\r")
			p.waitFor("line40\r\n")
			p.waitFor("30 100\r\n")
			p.waitFor("got:go:second\r\n")
			p.wantExit(7)
			out := string(p.out)
			last := 0
			for i := 1; i <= 40; i++ {
				l := fmt.Sprintf("line%d\r\n", i)
				if strings.Count(out, l) != 1 {
					t.Fatalf("the terminal shows %q %d times, want once:\n%q", l, strings.Count(out, l), out)
				}
				at := strings.Index(out, l)
				if at < last {
					t.Fatalf("line%d came before line%d:\n%q", i, i-1, out)
				}
				last = at
			}
			// The line was shown in place and taken away: the cursor went
			// back where the program had left it.
			if !strings.Contains(out, "\x1b7\n\r\x1b[Kcocoonbox: connection to main lost; reconnecting") || !strings.Contains(out, "\r\x1b[K\x1b8") {
				t.Errorf("the reconnecting line was not shown in place and taken away:\n%q", out)
			}
			// It names the way out: a typed Ctrl-C is a byte for the box.
			if !strings.Contains(out, "\x1b[Kcocoonbox: connection to main lost; reconnecting; ~. gives up") {
				t.Errorf("the reconnecting line does not say ~. gives up:\n%q", out)
			}
			// Down for 2 s, the line counts the seconds in place, once a
			// second.
			if fault == "outage" && !strings.Contains(out, "\r\x1b[Kcocoonbox: connection to main lost; reconnecting (1 s)") {
				t.Errorf("the reconnecting line did not count the seconds of a 2 s outage:\n%q", out)
			}
		})
	}
}

// sessionList is `cocoonbox rsh --list main`'s output.
func sessionList(t *testing.T, b *testBox) string {
	t.Helper()
	cmd := exec.Command("cocoonbox", "rsh", "--list", "main")
	cmd.Env = resumeEnv(b, nil)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("rsh --list: %v\n%s", err, out)
	}
	return string(out)
}

// waitList polls `rsh --list` until its output contains want (or, with
// gone, no longer contains it).
func waitList(t *testing.T, b *testBox, want string, gone bool) string {
	t.Helper()
	for range 200 {
		out := sessionList(t, b)
		if strings.Contains(out, want) != gone {
			return out
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("rsh --list never showed %q (gone: %v)", want, gone)
	return ""
}

// TestRshTerminalAttach: the client of an `rsh -t` shell killed with
// SIGKILL leaves the shell in the box; `rsh --list` shows it detached,
// `rsh --attach` takes it back with the output written meanwhile, input
// reaches it, and its exit code and the new terminal's termios are right.
func TestRshTerminalAttach(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	p := startProgOnPTY(t, "cocoonbox", resumeEnv(b, nil), "rsh", "-t", "main",
		`echo READY; read a; echo "before:$a"; while [ ! -e go ]; do sleep 0.05; done; echo while-away; read b; echo "after:$b"; exit 5`)
	p.waitFor("READY")
	p.write("one\r")
	p.waitFor("before:one\r\n")
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	out := waitList(t, b, "detached", false)
	if !strings.Contains(out, "echo READY") {
		t.Errorf("rsh --list does not show the command:\n%s", out)
	}
	write(t, filepath.Join(b.Workspace, "go"), "")
	a := startProgOnPTY(t, "cocoonbox", resumeEnv(b, nil), "rsh", "--attach", "main")
	a.waitFor("while-away\r\n")
	a.write("two\r")
	a.waitFor("after:two\r\n")
	a.wantExit(5)
	if out := sessionList(t, b); strings.Contains(out, "echo READY") {
		t.Errorf("the session is still listed after its exit:\n%s", out)
	}
}

// TestRshTerminalWindowEnds: terminals closed under two `rsh -t` shells
// (SIGHUP) detach the shells, which the box keeps for the terminal resume
// window: `rsh --attach` with no id lists both and takes neither (255),
// and when no client came back the box ends them.
func TestRshTerminalWindowEnds(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	var pids []int
	for _, name := range []string{"pid1", "pid2"} {
		p := startProgOnPTY(t, "cocoonbox", resumeEnv(b, nil, "COCOONBOX_RESUME_TERMINAL_WINDOW=3s"), "rsh", "-t", "main",
			`echo $$ > `+name+`; echo READY; exec sleep 600`)
		p.waitFor("READY")
		p.cmd.Process.Signal(syscall.SIGHUP)
		p.wantExit(255)
		var n int
		fmt.Sscan(readFile(t, filepath.Join(b.Workspace, name)), &n)
		pids = append(pids, n)
	}
	list := sessionList(t, b)
	for i := 0; strings.Count(list, " detached ") < 2; i++ {
		if i == 200 {
			t.Fatalf("rsh --list never showed both shells detached:\n%s", list)
		}
		time.Sleep(50 * time.Millisecond)
		list = sessionList(t, b)
	}
	c := exec.Command("cocoonbox", "rsh", "--attach", "main")
	c.Env = resumeEnv(b, nil)
	out, err := c.CombinedOutput()
	if code := c.ProcessState.ExitCode(); code != 255 || !strings.Contains(string(out), "detached terminal sessions in main: name one with: cocoonbox rsh --attach main ID") {
		t.Errorf("rsh --attach with two detached: %v, exit %d, want 255 and the list:\n%s", err, code, out)
	}
	for _, l := range strings.Split(strings.TrimSpace(list), "\n")[1:] {
		if id, _, _ := strings.Cut(l, " "); !strings.Contains(string(out), id) {
			t.Errorf("rsh --attach does not list %s:\n%s", id, out)
		}
	}
	for _, n := range pids {
		for i := 0; syscall.Kill(n, 0) == nil; i++ {
			if i == 600 {
				t.Fatalf("the shell %d still runs 30 s after a window of 3 s", n)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitList(t, b, "sleep", true)
}

// TestSSHStdioTerminalResumes: OpenSSH's ssh -t main.cocoonbox (through
// cocoonbox-ssh --stdio, the block cocoonbox ssh-config writes) on a
// terminal, through an outage between --stdio and the box: the
// reconnecting line shows on ssh's terminal, every line and what was
// typed meanwhile arrive, ssh exits with the command's code and gives
// the terminal back as it was. Then ssh killed with SIGKILL leaves its
// next shell in the box (its --stdio saw the connection end), which rsh
// --attach takes back.
func TestSSHStdioTerminalResumes(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	fp := cutProxy(t, b)
	cfg := writeSSHConfig(t, b)
	env := resumeEnv(b, fp)
	p := startProgOnPTY(t, "ssh", env, "-F", cfg, "-t", "main.cocoonbox",
		`echo READY; read a; i=0; while [ $i -lt 20 ]; do i=$((i+1)); echo line$i; sleep 0.1; done; read b; echo "got:$a:$b"; exit 7`)
	p.waitFor("READY")
	p.write("go\r")
	p.waitFor("line1\r\n")
	fp.Outage(2 * time.Second)
	p.waitFor("cocoonbox-ssh: connection to main lost; reconnecting")
	p.write("second\r")
	p.waitFor("line20\r\n")
	p.waitFor("got:go:second\r\n")
	p.wantExit(7)
	for i := 1; i <= 20; i++ {
		if n := strings.Count(string(p.out), fmt.Sprintf("line%d\r\n", i)); n != 1 {
			t.Fatalf("line%d shown %d times, want once:\n%q", i, n, p.out)
		}
	}

	// --stdio in a session of its own, so that the terminal's hangup at
	// ssh's death does not kill it too: it sees only its SSH connection
	// end, as under an editor that killed its ssh.
	var proxy string
	for _, l := range strings.Split(readFile(t, cfg), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), " "); ok && strings.EqualFold(k, "ProxyCommand") {
			proxy = v
		}
	}
	if proxy == "" {
		t.Fatalf("no ProxyCommand in %s:\n%s", cfg, readFile(t, cfg))
	}
	k := startProgOnPTY(t, "ssh", env, "-F", cfg, "-o", "ProxyCommand=setsid "+proxy, "-t", "main.cocoonbox", `echo READY; read a; echo "got:$a"; exit 4`)
	k.waitFor("READY")
	k.cmd.Process.Signal(syscall.SIGKILL)
	<-k.exited
	waitList(t, b, "detached", false)
	a := startProgOnPTY(t, "cocoonbox", resumeEnv(b, nil), "rsh", "--attach", "main")
	a.write("back\r")
	a.waitFor("got:back\r\n")
	a.wantExit(4)
}

// TestRshTerminalTerminfoResume: as TestSSHTerminalTerminfo, on the
// session path: TERM and the local compiled terminfo entry reach the box
// (the open carries the entry, the agent installs it), and the box's
// environment does not keep the entry's variable.
func TestRshTerminalTerminfoResume(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	dir, local := localTerminfo(t, "cocoonbox-resume-term")
	env := append(resumeEnv(b, nil), "TERM=cocoonbox-resume-term", "TERMINFO="+dir)
	p := startProgOnPTY(t, "cocoonbox", env, "rsh", "-t", "main",
		fmt.Sprintf(`echo "TERM=$TERM vars=${COCOONBOX_TERMINFO:-none}"; cmp %s ~/.terminfo/c/cocoonbox-resume-term && tput clear >/dev/null && echo TERMINFO-OK`, local))
	p.waitFor("TERM=cocoonbox-resume-term vars=none\r\n")
	p.waitFor("TERMINFO-OK\r\n")
	p.wantExit(0)
}

// TestRshTerminalAbandon: `~.` typed while the link is down (an outage
// of 2 s: every connection reset, new ones refused) ends the client with
// 255 and its termios restored, and ends the shell in the box at once,
// not when the terminal window (10 min here) closes: the client reaches
// the box again, for a few seconds at most, to end it.
func TestRshTerminalAbandon(t *testing.T) {
	t.Parallel()
	b := startBox(t)
	fp := cutProxy(t, b)
	p := startProgOnPTY(t, "cocoonbox", resumeEnv(b, fp, "COCOONBOX_RESUME_TERMINAL_WINDOW=10m"), "rsh", "-t", "main",
		`echo $$ > pid; echo READY; exec sleep 600`)
	p.waitFor("READY")
	var pid int
	fmt.Sscan(readFile(t, filepath.Join(b.Workspace, "pid")), &pid)
	fp.Outage(2 * time.Second)
	p.waitFor("cocoonbox: connection to main lost; reconnecting")
	p.write("\r~.")
	p.wantExit(255)
	for i := 0; syscall.Kill(pid, 0) == nil; i++ {
		if i == 400 {
			t.Fatalf("the shell %d still runs 20 s after ~., in a window of 10 min", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
