package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// startSSHD runs OpenSSH's sshd on a free loopback port with generated
// keys, and writes an ssh_config whose host "bench" reaches it.
func (e *env) startSSHD() (func(), error) {
	dir := filepath.Join(e.work, "sshd")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	for _, k := range []string{"host_key", "user_key"} {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, k)).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("ssh-keygen: %v: %s", err, out)
		}
	}
	pub, err := os.ReadFile(filepath.Join(dir, "user_key.pub"))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), pub, 0o600); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	u, err := user.Current()
	if err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %[2]s/host_key
AuthorizedKeysFile %[2]s/authorized_keys
PidFile %[2]s/sshd.pid
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
AcceptEnv GIT_PROTOCOL
Subsystem sftp /usr/lib/openssh/sftp-server
`, port, dir)
	if err := os.WriteFile(filepath.Join(dir, "sshd_config"), []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	os.MkdirAll("/run/sshd", 0o755)
	sshd := exec.Command("/usr/sbin/sshd", "-D", "-e", "-f", filepath.Join(dir, "sshd_config"))
	logf, err := os.Create(filepath.Join(dir, "sshd.log"))
	if err != nil {
		return nil, err
	}
	sshd.Stdout, sshd.Stderr = logf, logf
	if err := sshd.Start(); err != nil {
		return nil, err
	}
	e.sshdPid = sshd.Process.Pid
	stop := atExit(func() { sshd.Process.Signal(syscall.SIGTERM); sshd.Wait(); logf.Close() })
	e.sshCfg = filepath.Join(dir, "ssh_config")
	client := fmt.Sprintf(`Host bench
  HostName 127.0.0.1
  Port %d
  User %s
  IdentityFile %s/user_key
  IdentitiesOnly yes
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
`, port, u.Username, dir) + sshdInetdBlock(filepath.Join(dir, "sshd_config"), u.Username, filepath.Join(dir, "user_key"))
	if err := os.WriteFile(e.sshCfg, []byte(client), 0o600); err != nil {
		stop()
		return nil, err
	}
	for i := 0; ; i++ {
		if exec.Command("ssh", "-F", e.sshCfg, "bench", "true").Run() == nil {
			return stop, nil
		}
		if i == 100 {
			stop()
			log, _ := os.ReadFile(filepath.Join(dir, "sshd.log"))
			return nil, fmt.Errorf("sshd did not answer: %s", log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startBox starts a local box with its own HOME under the work directory;
// args go to localbox start.
func (e *env) startBox(args ...string) (func(), error) {
	home := filepath.Join(e.work, "home")
	// 0711: served by root, the local box runs box commands as the box
	// user, which must reach its state directory under this HOME.
	if err := os.MkdirAll(home, 0o711); err != nil {
		return nil, err
	}
	// A claims directory of its own unless given one, as make demo's: a
	// local box serving on this machine keeps its claim of the box user,
	// and the run makes no Unix user that outlives it (served by root,
	// a second claimant of `user` gets one made for it).
	e.boxEnv = []string{"HOME=" + home, "PATH=" + e.bin + ":" + os.Getenv("PATH"), "COCOONBOX_CLAIMS_DIR=" + filepath.Join(e.work, "claims")}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k == "LANG" || k == "TERM" || k == "COCOONBOX_CONTROL_LOG" || k == "COCOONBOX_CLAIMS_DIR" ||
			k == "COCOONBOX_RESUME" || k == "COCOONBOX_RESUME_WINDOW" {
			e.boxEnv = append(e.boxEnv, kv)
		}
	}
	// Registered first, so that a signal during start stops it too.
	stop := atExit(func() { e.ours("cocoonbox", "localbox", "stop").Run() })
	if *engine != "" {
		args = append(args, "--engine", *engine)
	}
	if out, err := e.ours("cocoonbox", append([]string{"localbox", "start"}, args...)...).CombinedOutput(); err != nil {
		stop()
		return nil, fmt.Errorf("%v: %s", err, out)
	}
	return stop, nil
}

// ours is a command through our binaries, in the local box's environment.
func (e *env) ours(name string, args ...string) *exec.Cmd {
	c := exec.Command(filepath.Join(e.bin, name), args...)
	if _, err := os.Stat(c.Path); err != nil {
		c = exec.Command(name, args...)
	}
	c.Env = e.boxEnv
	if e.resume != "" {
		c.Env = append(slices.Clip(c.Env), "COCOONBOX_RESUME="+e.resume)
	}
	return c
}

// theirs is a command through OpenSSH, with the bench ssh_config.
func (e *env) theirs(name string, args ...string) *exec.Cmd {
	c := exec.Command(name, args...)
	c.Env = append(os.Environ(), "GIT_SSH_COMMAND=ssh -F "+e.sshCfg)
	return c
}

// noRSS drops the peak RSS of a path whose client is not ours.
func noRSS(f func() (time.Duration, int64, error)) func() (time.Duration, int64, error) {
	return func() (time.Duration, int64, error) {
		d, _, err := f()
		return d, 0, err
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func (e *env) workloads() []workload {
	// Output goes to /dev/null itself, so no copying goroutine of ours
	// weighs on either path.
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		panic(err)
	}
	devnull := func(c *exec.Cmd) *exec.Cmd {
		c.Stdout = null
		return c
	}
	upload := func(c *exec.Cmd) *exec.Cmd {
		c.Stdin = io.LimitReader(zeros{}, *size)
		return c
	}
	shim := func(args ...string) *exec.Cmd { return e.ours("cocoonbox-ssh", append([]string{"main"}, args...)...) }
	ssh := func(args ...string) *exec.Cmd {
		return e.theirs("ssh", append([]string{"-F", e.sshCfg, "bench"}, args...)...)
	}
	many := func(mk func() *exec.Cmd) func() (time.Duration, int64, error) {
		return func() (time.Duration, int64, error) {
			var ds []time.Duration
			var peak int64
			for i := 0; i < *calls; i++ {
				d, m, err := timed(mk())
				if err != nil {
					return 0, 0, err
				}
				ds = append(ds, d)
				peak = max(peak, m)
			}
			return median(ds), peak, nil
		}
	}
	once := func(mk func() *exec.Cmd) func() (time.Duration, int64, error) {
		return func() (time.Duration, int64, error) { return timed(mk()) }
	}
	g := &gitWork{e: e, dir: filepath.Join(e.work, "git")}
	sf := &sftpWork{e: e}
	ps := &pscpWork{e: e}
	// At 0 ms sshd runs as ssh's ProxyCommand, as ours does; at a round
	// trip (the latency table) it listens behind the delay proxy.
	sshdHost := sshdInetdHost
	if e.latency {
		sshdHost = "bench"
	}
	headCmd := fmt.Sprintf("head -c %d /dev/zero", *size)
	ws := []workload{
		{name: "startup", note: "median wall time of one `true`",
			ours: many(func() *exec.Cmd { return shim("true") }),
			ssh:  many(func() *exec.Cmd { return ssh("true") })},
		{name: "terminal startup", note: "median wall time of one `true` on a terminal (-tt)",
			ours: many(func() *exec.Cmd { return shim("-tt", "true") }),
			ssh:  many(func() *exec.Cmd { return ssh("-tt", "true") })},
		{name: "download", bytes: *size,
			ours:  once(func() *exec.Cmd { return devnull(shim(headCmd)) }),
			ssh:   once(func() *exec.Cmd { return devnull(ssh(headCmd)) }),
			limit: func() (time.Duration, error) { return loopbackCopy(*size) }},
		{name: "upload", bytes: *size,
			ours:  once(func() *exec.Cmd { return upload(shim("cat >/dev/null")) }),
			ssh:   once(func() *exec.Cmd { return upload(ssh("cat >/dev/null")) }),
			limit: func() (time.Duration, error) { return loopbackCopy(*size) }},
		{name: "startup via ssh --stdio", note: "median wall time of one `true`",
			ours: noRSS(many(func() *exec.Cmd { return e.viaStdio("true") })),
			ssh:  many(func() *exec.Cmd { return ssh("true") }),
			base: many(func() *exec.Cmd { return shim("true") }), baseName: "the shim's own startup"},
		{name: "download via ssh --stdio", bytes: *size, note: "OpenSSH's ssh through cocoonbox-ssh --stdio",
			ours: noRSS(once(func() *exec.Cmd { return devnull(e.viaStdio(headCmd)) })),
			ssh:  once(func() *exec.Cmd { return devnull(ssh(headCmd)) }),
			base: once(func() *exec.Cmd { return devnull(shim(headCmd)) }), baseName: "the shim's own download",
			limit: func() (time.Duration, error) { return loopbackCopy(*size) }},
		{name: "upload via ssh --stdio", bytes: *size, note: "OpenSSH's ssh through cocoonbox-ssh --stdio",
			ours: noRSS(once(func() *exec.Cmd { return upload(e.viaStdio("cat >/dev/null")) })),
			ssh:  once(func() *exec.Cmd { return upload(ssh("cat >/dev/null")) }),
			base: once(func() *exec.Cmd { return upload(shim("cat >/dev/null")) }), baseName: "the shim's own upload",
			limit: func() (time.Duration, error) { return loopbackCopy(*size) }},
		{name: "sftp requests via ssh --stdio", setup: sf.setup, note: "sftp -b: mkdir and rmdir, one request each, one after the other; the time of the requests alone",
			ours: sf.ours, ssh: sf.theirs(sshdHost), requests: sf.requests},
		{name: "pscp upload via ssh --stdio", setup: ps.setup, bytes: *pscpSize, note: "PuTTY's pscp, 4 KiB SFTP writes; sshd -i as its proxy command",
			ours: ps.ours, ssh: ps.theirs},
		{name: "git clone", setup: g.setup, ours: g.clone(true), ssh: g.clone(false)},
		{name: "git fetch (no-op)", ours: g.fetch(true), ssh: g.fetch(false)},
		{name: "rsync (first)", setup: g.setupRsync, ours: g.rsync(true, true), ssh: g.rsync(false, true)},
		{name: "rsync (no-op)", ours: g.rsync(true, false), ssh: g.rsync(false, false)},
	}
	return append(ws, e.resumable(ws, "startup", "download", "upload", "git clone", "rsync (first)")...)
}

// resumable returns a twin of each named workload whose commands of ours
// run as resumable sessions (COCOONBOX_RESUME=on), with the plain one
// (COCOONBOX_RESUME=off) as its base: "resumable <name>", beside
// OpenSSH in the same rounds.
func (e *env) resumable(ws []workload, names ...string) []workload {
	with := func(v string, f func() (time.Duration, int64, error)) func() (time.Duration, int64, error) {
		return func() (time.Duration, int64, error) {
			e.resume = v
			defer func() { e.resume = "" }()
			return f()
		}
	}
	var twins []workload
	for _, w := range ws {
		if !slices.Contains(names, w.name) {
			continue
		}
		t := w
		t.name = "resumable " + w.name
		t.ours, t.base, t.baseName = with("on", w.ours), with("off", w.ours), "the plain "+w.name
		twins = append(twins, t)
	}
	return twins
}

// boxImage is box main's image as boxes status reports it ("?" when it
// cannot be read).
func boxImage(e *env) string {
	out, err := e.ours("cocoonbox", "boxes", "status", "main", "--json").Output()
	var st struct{ Image string }
	if err != nil || json.Unmarshal(out, &st) != nil || st.Image == "" {
		return "?"
	}
	return st.Image
}
