package cli_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"hash"
	"os"
	"os/exec"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSSHMatchesOpenSSH runs one table of cases through OpenSSH's ssh
// against sshd on loopback and through cocoonbox-ssh against a local box,
// and through OpenSSH's ssh with cocoonbox-ssh --stdio as its ProxyCommand,
// and fails on any difference in stdout, stderr or exit status
// (DESIGN.md "Exec semantics: exactly ssh's"). Both run the same user's
// login shell; the cases depend on neither the working directory nor HOME,
// which legitimately differ.
func TestSSHMatchesOpenSSH(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Fatalf("%v: install openssh-client (scripts/deps.sh)", err)
	}
	d := startSSHD(t)
	b := startBox(t)
	via := newStdioSSH(t, b)
	shim, err := exec.LookPath("cocoonbox-ssh")
	if err != nil {
		t.Fatal(err)
	}
	random := make([]byte, 8<<20)
	rand.Read(random)

	tests := []struct {
		name  string
		opts  []string // before the host word
		args  []string // after it
		stdin []byte   // nil: /dev/null
		env   []string // added to both environments
		hash  bool     // compare stdout by length and sha256
	}{
		{name: "exit 0", args: []string{"true"}},
		{name: "exit 1", args: []string{"false"}},
		{name: "exit 42", args: []string{"exit 42"}},
		{name: "exit 255", args: []string{"exit 255"}},
		{name: "exit 127", args: []string{"no-such-command-here"}},
		{name: "exit 126", args: []string{"/etc/passwd"}},
		{name: "killed by KILL", args: []string{"echo before; kill -9 $$"}},
		{name: "killed by TERM", args: []string{"echo before >&2; kill -TERM $$"}},
		{name: "stdin to EOF", args: []string{"cat; echo end"}, stdin: []byte("line 1\nline 2 without newline")},
		{name: "stdin counted", args: []string{"wc -l"}, stdin: []byte("a\nb\nc\n")},
		{name: "stdin 8 MiB", args: []string{"cat"}, stdin: random, hash: true},
		{name: "stderr only", args: []string{"echo oops >&2; exit 3"}},
		{name: "stdout and stderr", args: []string{"seq 1 20000; seq 1 2000 >&2"}},
		{name: "words joined with single spaces", args: []string{"printf", "'[%s]'", `"a  b"`, `'c"d'`, `e\ f`, "$((6*7))", ";", "echo"}},
		{name: "words with quotes and dollars", args: []string{"x='a b';", "echo", `"$x"`, "'$x'", `\$x`, "${x%b}"}},
		{name: "semicolons", args: []string{"echo", "1", ";", "echo", "2;echo", "3"}},
		{name: "globs", args: []string{"echo", "/etc/host*", "/etc/no-such-*", "'/etc/host*'"}},
		{name: "background keeps the output open", args: []string{"(sleep 1; echo late) & echo now"}},
		{name: "empty command with -T", opts: []string{"-T"}, stdin: []byte("echo hi; echo err >&2; exit 7\n")},
		{name: "empty command, stdin not a terminal", stdin: []byte("echo hi\n")},
		{name: "-t, stdin not a terminal", opts: []string{"-t"}, args: []string{"echo hi"}},
		{name: "-tt -q runs on a terminal", opts: []string{"-tt", "-q"}, args: []string{"echo out; echo err >&2; tty >/dev/null && echo tty"}},
		{name: "-tt -q then ~. disconnects", opts: []string{"-tt", "-q"}, args: []string{"cat"}, stdin: []byte("~.")},
		{name: "100 MiB to stdout", args: []string{"yes 0123456789abcdef | head -c 104857600"}, hash: true},
		{name: "-n", opts: []string{"-n"}, args: []string{"cat; echo end"}, stdin: []byte("not read\n")},
		{name: "-q", opts: []string{"-q"}, args: []string{"echo quiet"}},
		// LC_* is in the box's AcceptEnv (and the test sshd's), DIFF_* not.
		{name: "-o SendEnv", opts: []string{"-o", "SendEnv=LC_DIFF_* DIFF_*"}, env: []string{"LC_DIFF_A=1", "LC_DIFF_B=x y", "DIFF_X=z", "NOT_SENT=z"},
			args: []string{`echo "$LC_DIFF_A|$LC_DIFF_B|${DIFF_X-unset}|${NOT_SENT-unset}"`}},
		{name: "-o SendEnv, none matches", opts: []string{"-oSendEnv LC_DIFF_NONE"}, env: []string{"LC_DIFF_A=1"}, args: []string{`echo "${LC_DIFF_A-unset}"`}},
		{name: "-o SetEnv", opts: []string{"-o", `SetEnv LC_DIFF_C=3 "LC_DIFF_D=a b" DIFF_E=4`}, args: []string{`echo "$LC_DIFF_C|$LC_DIFF_D|${DIFF_E-unset}"`}},
		{name: "SSH_CONNECTION, SSH_CLIENT, no SSH_TTY", args: []string{`set -- $SSH_CONNECTION; echo $#; set -- $SSH_CLIENT; echo $#; echo "${SSH_TTY-unset}"`}},
		{name: "SSH_TTY with -tt", opts: []string{"-tt", "-q"}, args: []string{`case $SSH_TTY in /dev/pts/*) [ "$SSH_TTY" = "$(tty)" ] && echo pts;; *) echo "$SSH_TTY";; esac`}},
		{name: "options after the host", args: []string{"-n", "cat"}, stdin: []byte("not read\n")},
		{name: "-- after the host", args: []string{"--", "echo", "-n", "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sshArgs := append([]string{"-F", d.Config, "-p", d.Port}, tt.opts...)
			sshArgs = append(sshArgs, d.User+"@127.0.0.1")
			want := run(t, exec.Command("ssh", append(sshArgs, tt.args...)...), tt.stdin, append(cleanEnv(t), tt.env...), tt.hash)
			shimArgs := append(append(append([]string{}, tt.opts...), "main"), tt.args...)
			got := run(t, exec.Command(shim, shimArgs...), tt.stdin, append(append(cleanEnv(t), b.Env...), tt.env...), tt.hash)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("ssh %q and cocoonbox-ssh %q differ (-ssh +cocoonbox-ssh):\n%s", sshArgs, shimArgs, diff)
			}
			// The third way: OpenSSH's ssh itself through cocoonbox-ssh --stdio.
			viaArgs := append(append(append([]string{"-F", via.Config}, tt.opts...), "main.cocoonbox"), tt.args...)
			viaGot := run(t, exec.Command("ssh", viaArgs...), tt.stdin, append(append(cleanEnv(t), b.Env...), tt.env...), tt.hash)
			if diff := cmp.Diff(want, viaGot); diff != "" {
				t.Errorf("ssh %q and ssh %q through cocoonbox-ssh --stdio differ (-sshd +stdio):\n%s", sshArgs, viaArgs, diff)
			}
		})
	}
}

// result is what a command did, as the differential test compares it.
type result struct {
	Stdout, Stderr string
	Code           int
}

// run runs cmd with stdin (nil: /dev/null) in env.
func run(t *testing.T, cmd *exec.Cmd, stdin []byte, env []string, hash bool) result {
	t.Helper()
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	cmd.Env = env
	var stdout hashOrKeep
	stdout.hash = hash
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return result{Stdout: stdout.String(), Stderr: stderr.String(), Code: cmd.ProcessState.ExitCode()}
}

// cleanEnv is an environment with nothing of the developer's ssh setup.
func cleanEnv(t *testing.T) []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "LANG=C.UTF-8"}
}

// hashOrKeep keeps what is written, or only its length and sha256.
type hashOrKeep struct {
	hash bool
	buf  bytes.Buffer
	sum  hash.Hash
	n    int64
}

func (w *hashOrKeep) Write(p []byte) (int, error) {
	if !w.hash {
		return w.buf.Write(p)
	}
	if w.sum == nil {
		w.sum = sha256.New()
	}
	w.n += int64(len(p))
	return w.sum.Write(p)
}

func (w *hashOrKeep) String() string {
	switch {
	case !w.hash:
		return w.buf.String()
	case w.sum == nil:
		return "0 bytes"
	}
	return fmt.Sprintf("%d bytes, sha256 %x", w.n, w.sum.Sum(nil))
}
