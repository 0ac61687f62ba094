package main

import (
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/cocoonbox/cocoonbox/sshserve"
)

var (
	sftpReqs    = flag.Int("sftp-requests", 4000, "SFTP requests of the sftp workload at 0 ms")
	rttSftpReqs = flag.Int("rtt-sftp-requests", 200, "SFTP requests of the sftp workload at a round trip above 0 in the latency table")
)

// sftpWork is the sftp workload: OpenSSH's sftp -b running a batch of
// `cd .`, two SSH_FXP requests of a few bytes each (REALPATH, then STAT of
// the answer), which the client sends each only after the answer to the
// one before: a request's round trip through every process on the path,
// 4,000 times. The requests touch nothing but the kernel's caches in the
// box: mkdir and rmdir, as the row ran before 2026-12-07, made the row
// measure the disk's journal as much as the path (2,000 of each alone
// took 3.9 to 4.3 s here, from one run to the next, under the other
// engineers' load; docs/benchmarks.md). A run is timed less a run of
// the first two requests alone, so the row is the requests' time
// without the session's start (sshd -i's key exchange and re-exec take
// 0.2 s, the shim's 20 ms).
type sftpWork struct {
	e *env
	// batch and short are the batch files of n and of 2 requests.
	batch, short string
	n            int
}

// setup writes the batch files of *sftpReqs requests (rounded down to an
// even number, at least 4) and of 2, and the directory sshd's sessions
// start in.
func (w *sftpWork) setup() error {
	w.n = max(*sftpReqs&^1, 4)
	write := func(n int) (string, error) {
		var b strings.Builder
		for range n / 2 {
			b.WriteString("cd .\n")
		}
		p := filepath.Join(w.e.work, fmt.Sprintf("sftp-batch-%d", n))
		return p, os.WriteFile(p, []byte(b.String()), 0o600)
	}
	var err error
	if w.batch, err = write(w.n); err != nil {
		return err
	}
	if w.short, err = write(2); err != nil {
		return err
	}
	return os.MkdirAll(w.sshdDir(), 0o700)
}

// requests is how many requests a run's time counts.
func (w *sftpWork) requests() int { return w.n - 2 }

// less times the batch of n requests less that of 2, each run by run;
// the CPU time the short run's processes spent is taken off spent too.
func (w *sftpWork) less(run func(batch string) (time.Duration, error)) (time.Duration, int64, error) {
	s0 := spent
	short, err := run(w.short)
	if err != nil {
		return 0, 0, err
	}
	shortCPU := spent - s0
	long, err := run(w.batch)
	spent -= shortCPU
	return max(long-short, 0), 0, err
}

func (w *sftpWork) sshdDir() string { return filepath.Join(w.e.work, "sftp-sshd") }

// ours is sftp to main.cocoonbox through cocoonbox-ssh --stdio, as the
// Host block of `cocoonbox ssh-config` has it; it starts in the box's
// workspace.
func (w *sftpWork) ours() (time.Duration, int64, error) {
	return w.less(func(batch string) (time.Duration, error) {
		c := exec.Command("sftp", "-q", "-F", w.e.stdioCfg, "-b", batch, "main.cocoonbox")
		c.Env = w.e.boxEnv
		d, _, err := timed(c)
		return d, err
	})
}

// theirs is sftp to sshd: at 0 ms `sshd -i` run as the ProxyCommand (the
// same shape as ours: ssh, a server on its pipes, sftp-server), through
// the delay proxy to the listening sshd at a round trip.
func (w *sftpWork) theirs(host string) func() (time.Duration, int64, error) {
	return func() (time.Duration, int64, error) {
		return w.less(func(batch string) (time.Duration, error) {
			d, _, err := timed(w.e.theirs("sftp", "-q", "-F", w.e.sshCfg, "-b", batch, host+":"+w.sshdDir()))
			return d, err
		})
	}
}

// sshdInetdHost is the bench ssh_config's host that reaches sshd -i as
// the ProxyCommand.
const sshdInetdHost = "bench-inetd"

// sshdInetdBlock is the ssh_config block of sshdInetdHost: sshd with
// config run by ssh on its pipes (sshd -i), the bench's key.
func sshdInetdBlock(config, user, key string) string {
	return fmt.Sprintf(`Host %s
  ProxyCommand /usr/sbin/sshd -i -f %s
  User %s
  IdentityFile %s
  IdentitiesOnly yes
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
`, sshdInetdHost, config, user, key)
}

var pscpSize = flag.Int64("pscp-size", 50_000_000, "bytes of the pscp upload workload")

// pscpWork is the pscp workload: PuTTY's pscp uploading a file of
// -pscp-size random bytes over SFTP (4 KiB writes, pipelined as far as the
// SSH window lets them), through cocoonbox-ssh --stdio and through sshd -i,
// each PuTTY's -proxycmd.
type pscpWork struct {
	e         *env
	src, ppk  string
	boxHostFP string // our host key's fingerprint
	sshHostFP string // sshd's
}

// setup writes the file, the bench key in PuTTY's format, and reads both
// host keys' fingerprints.
func (w *pscpWork) setup() error {
	if w.src != "" {
		return nil
	}
	w.src = filepath.Join(w.e.work, "pscp-src")
	f, err := os.Create(w.src)
	if err != nil {
		return err
	}
	_, err = io.CopyN(f, rand.Reader, *pscpSize)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	dir := filepath.Join(w.e.work, "sshd")
	w.ppk = filepath.Join(dir, "user_key.ppk")
	if out, err := exec.Command("puttygen", filepath.Join(dir, "user_key"), "-O", "private", "-o", w.ppk).CombinedOutput(); err != nil {
		return fmt.Errorf("puttygen: %v: %s", err, out)
	}
	pub, err := os.ReadFile(filepath.Join(dir, "host_key.pub"))
	if err != nil {
		return err
	}
	k, _, _, _, err := ssh.ParseAuthorizedKey(pub)
	if err != nil {
		return err
	}
	w.sshHostFP = ssh.FingerprintSHA256(k)
	key, err := sshserve.HostKey(filepath.Join(w.e.work, "home", ".local", "state", "cocoonbox"))
	if err != nil {
		return err
	}
	w.boxHostFP = ssh.FingerprintSHA256(key.PublicKey())
	return nil
}

// ours is pscp through cocoonbox-ssh --stdio into the box's workspace.
func (w *pscpWork) ours() (time.Duration, int64, error) {
	c := exec.Command("pscp", "-q", "-batch", "-sftp", "-hostkey", w.boxHostFP,
		"-proxycmd", filepath.Join(w.e.bin, "cocoonbox-ssh")+" --stdio main.cocoonbox", "-l", "user", w.src, "main.cocoonbox:pscp-up")
	c.Env = w.e.boxEnv
	d, _, err := timed(c)
	return d, 0, err
}

// theirs is pscp through sshd -i, as the sftp row's sshd.
func (w *pscpWork) theirs() (time.Duration, int64, error) {
	u, err := user.Current()
	if err != nil {
		return 0, 0, err
	}
	c := exec.Command("pscp", "-q", "-batch", "-sftp", "-hostkey", w.sshHostFP, "-i", w.ppk,
		"-proxycmd", "/usr/sbin/sshd -i -f "+filepath.Join(w.e.work, "sshd", "sshd_config"), "-l", u.Username,
		w.src, "bench:"+filepath.Join(w.e.work, "pscp-up"))
	d, _, err := timed(c)
	return d, 0, err
}
