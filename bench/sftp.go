package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

var (
	sftpReqs    = flag.Int("sftp-requests", 4000, "SFTP requests of the sftp workload at 0 ms")
	rttSftpReqs = flag.Int("rtt-sftp-requests", 200, "SFTP requests of the sftp workload at a round trip above 0 in the latency table")
)

// sftpName is the directory each request pair of the sftp workload makes
// and removes, in the session's starting directory.
const sftpName = "cocoonbox-bench-sftp"

// sftpWork is the sftp workload: OpenSSH's sftp -b running a batch of
// mkdir and rmdir, one SSH_FXP request of a few bytes each, which the
// client sends only after the answer to the one before: a request's round
// trip through every process on the path, 4,000 times. A run is timed
// less a run of the first two requests alone, so the row is the requests'
// time without the session's start (sshd -i's key exchange and re-exec
// take 0.2 s, the shim's 20 ms).
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
			fmt.Fprintf(&b, "mkdir %s\nrmdir %[1]s\n", sftpName)
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

// less times the batch of n requests less that of 2, each run by run.
func (w *sftpWork) less(run func(batch string) (time.Duration, error)) (time.Duration, int64, error) {
	short, err := run(w.short)
	if err != nil {
		return 0, 0, err
	}
	long, err := run(w.batch)
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
