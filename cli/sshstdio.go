package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/internal/cores"
	"github.com/cocoonbox/cocoonbox/internal/printable"
	"github.com/cocoonbox/cocoonbox/internal/proc"
	"github.com/cocoonbox/cocoonbox/internal/rawio"
	"github.com/cocoonbox/cocoonbox/internal/safefile"
	"github.com/cocoonbox/cocoonbox/internal/version"
	"github.com/cocoonbox/cocoonbox/relay"
	"github.com/cocoonbox/cocoonbox/shim"
	"github.com/cocoonbox/cocoonbox/sshconfig"
	"github.com/cocoonbox/cocoonbox/sshserve"
)

// stdioUsage is the synopsis of prog's protocol mode.
func stdioUsage(prog string) string {
	return "usage: " + prog + " --stdio [--suffix SUFFIX] [-q] [-v] [-o CocoonboxResumeWindow=TIME] HOST\n" +
		"   as ssh_config's ProxyCommand: ProxyCommand " + prog + " --stdio %h\n"
}

// stdioOptions is cocoonbox-ssh --stdio's command line.
type stdioOptions struct {
	// Box is the box: HOST without Suffix.
	Box string
	// Suffix is taken off HOST's end: ".cocoonbox" unless --suffix.
	Suffix string
	// Verbose is -v: debug lines on stderr.
	Verbose bool
	// Quiet is -q: no line of ours on stderr but the one that ends the
	// run, for a client that reads a proxy command's stderr as part of
	// the SSH stream (asyncssh 2.10, Debian 12's).
	Quiet bool
	// ResumeWindow is -o CocoonboxResumeWindow, as the shim's; 0 when
	// not given.
	ResumeWindow time.Duration
}

// parseStdio parses the arguments after --stdio.
func parseStdio(args []string) (*stdioOptions, error) {
	o := &stdioOptions{}
	fs := flag.NewFlagSet("cocoonbox-ssh --stdio", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.Suffix, "suffix", ".cocoonbox", "")
	fs.BoolVar(&o.Verbose, "v", false, "")
	fs.BoolVar(&o.Quiet, "q", false, "")
	// An -o error is said as it is, not wrapped in the flag package's.
	var oerr error
	fs.Func("o", "", func(v string) error {
		oerr = stdioOption(o, v)
		return oerr
	})
	if err := fs.Parse(args); err != nil {
		if oerr != nil {
			return nil, oerr
		}
		return nil, err
	}
	if fs.NArg() != 1 {
		return nil, errors.New("--stdio takes one HOST, the box's name (ssh_config's %h)")
	}
	host := fs.Arg(0)
	if o.Suffix != "" && !strings.HasPrefix(o.Suffix, ".") {
		return nil, fmt.Errorf("--suffix %q: want a suffix starting with a dot, such as .cocoonbox", o.Suffix)
	}
	o.Box = strings.TrimSuffix(host, o.Suffix)
	if o.Box == "" || strings.ContainsAny(o.Box, " \t\r\n/@:") {
		return nil, fmt.Errorf("bad HOST %q: want BOX or BOX%s", host, o.Suffix)
	}
	return o, nil
}

// stdioOption applies --stdio's -o v: CocoonboxResumeWindow=TIME, the only
// ssh_config option that is --stdio's own (a first value wins, as ssh's).
func stdioOption(o *stdioOptions, v string) error {
	key, val, ok := strings.Cut(strings.TrimSpace(v), "=")
	if !ok {
		key, val, _ = strings.Cut(key, " ")
	}
	if !strings.EqualFold(strings.TrimSpace(key), "CocoonboxResumeWindow") {
		return fmt.Errorf("-o %s: --stdio takes only -o CocoonboxResumeWindow=TIME (the other options are the ssh's that runs it)", printable.Line(key, 40))
	}
	d, err := shim.ParseTime(strings.TrimSpace(val))
	if err != nil || d <= 0 {
		return fmt.Errorf("-o CocoonboxResumeWindow: bad value %q: want a time such as 10m, 1h or 90 (seconds)", printable.Line(val, 40))
	}
	if o.ResumeWindow == 0 {
		o.ResumeWindow = d
	}
	return nil
}

// sshStdio is cocoonbox-ssh --stdio (prog names it): an SSH-2 server on stdin and stdout
// for the user's own ssh, which runs it as its ProxyCommand. It returns 0
// once the client has disconnected, 255 with one line on stderr otherwise.
func sshStdio(prog string, args []string, env Env, s Streams) int {
	fail := func(err error) int {
		fmt.Fprintf(s.Err, "%s: %v\n", prog, err)
		return shim.ExitFailure
	}
	o, err := parseStdio(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(s.Out, stdioUsage(prog))
		return 0
	}
	if err != nil {
		fmt.Fprintf(s.Err, "%s: %v\n%s", prog, err, stdioUsage(prog))
		return shim.ExitFailure
	}
	// Our stdio is ssh's pipe: a closed one must be an error, not SIGPIPE.
	// Ctrl-C at the terminal is ssh's to handle; it ends us by closing our
	// stdin, or with SIGHUP.
	signal.Ignore(syscall.SIGPIPE, syscall.SIGINT, syscall.SIGQUIT)
	dir, err := env.stateDir()
	if err != nil {
		return fail(err)
	}
	key, err := sshserve.HostKey(dir)
	if err != nil {
		return fail(err)
	}
	if w := pinWarning(dir, key.PublicKey(), sshConfigAdvice(o.Suffix, os.Args[0])); w != "" && !o.Quiet {
		// ssh will refuse the key, loudly but without naming our fix.
		fmt.Fprintf(s.Err, "%s: %s\n", prog, w)
	}
	// ssh's ControlMaster or VS Code keep this process for days: each
	// channel's call sends the token saved then, so a new sign-in (after
	// devices revoke, or a localbox start) reaches it.
	env.resumeWindow = o.ResumeWindow
	c, err := env.dialFor("", true)
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	quiet := &quietUnless{w: s.Err, quiet: func() bool { return o.Quiet || sshIsQuiet() }}
	srv := &sshserve.Server{
		Box:      o.Box,
		Runner:   c,
		HostKey:  key,
		Terminfo: func(term string) []byte { return shim.Terminfo(term, env.Getenv) },
		Progress: quiet,
		Log:      quiet,
		Listen: func(ctx context.Context, spec relay.ListenSpec) (*relay.Listener, error) {
			return relay.Listen(ctx, c, o.Box, spec, quiet)
		},
		Prog:    prog,
		Version: sshSoftwareVersion(version.String()),
		Dial:    stdioDial(c, o.Box),
		DialUnix: func(ctx context.Context, path string) (sshserve.Conn, error) {
			return relay.DialUnix(ctx, c, o.Box, path)
		},
	}
	if o.Verbose {
		srv.Logf = func(format string, args ...any) {
			fmt.Fprintf(s.Err, "%s: debug: %s\r\n", prog, fmt.Sprintf(format, args...))
		}
	}
	// mosh's server only where mosh-client's UDP reaches it
	// (docs/cocoonbox-ssh.md, "mosh").
	srv.Check = func(line string) error {
		if shim.IsMoshServer(line) {
			_, err := shim.MoshUDP(c.Endpoint(), o.Box)
			return err
		}
		return nil
	}
	// A relay of SSH packets to Execs: one P while they come one at a
	// time (an sftp request's round trip), every core for a transfer.
	defer cores.Follow()()
	in, restore := stdioIn(s.In, s.Out, s.Err)
	defer restore()
	if err := srv.Serve(sshserve.StdioConn(in, stdioOut(s.Out))); err != nil {
		return fail(err)
	}
	return 0
}

// stdioPipeSize is what --stdio asks its pipes to ssh to hold, in bytes
// (Linux's default is 64 KiB, and an unprivileged process may ask for up
// to /proc/sys/fs/pipe-max-size, 1 MiB by default): ssh reads and we
// write up to 256 KiB at a time rather than 64 KiB (docs/benchmarks.md:
// 18% less CPU on a 1 GiB download).
const stdioPipeSize = 1 << 20

// stdioIn is --stdio's stdin made ready: a pipe grown to stdioPipeSize,
// read through the runtime's poller (proc.Pollable), so that waiting for
// the next of a stream of small requests (sftp's) parks no thread in
// read(2), with raw reads (internal/rawio); and what puts it back. Its stdout is only grown: a write
// blocks only while ssh is behind, and one that waits in the poller
// instead cost ssh and this process more CPU on a 512 MiB download
// (0.9–1.2 s against 1.1–2.6 s over three runs).
//
// A stdin that is also stdout or stderr stays as it is: socat's EXEC
// hands its child one end of a socketpair as both, one file description,
// whose O_NONBLOCK Pollable would set for the writes too; they do not go
// through the poller, so the first write to find the socket's buffer full
// failed with EAGAIN, and a download stalled after 0.2 to 28 MB.
func stdioIn(in io.Reader, out, errw io.Writer) (io.Reader, func()) {
	if f, ok := out.(*os.File); ok {
		proc.GrowPipe(f, stdioPipeSize)
	}
	f, ok := in.(*os.File)
	if !ok {
		return in, func() {}
	}
	proc.GrowPipe(f, stdioPipeSize)
	if sameStream(f, out) || sameStream(f, errw) {
		return f, func() {}
	}
	g, restore := proc.Pollable(f)
	if g == f {
		return f, restore
	}
	// The duplicate is ours, non-blocking and in the poller: its reads
	// need not wake the runtime's sysmon (internal/rawio).
	return rawio.File(g), restore
}

// stdioOut is --stdio's stdout with the answers to requests (writes
// below sshserve.DirectMax) made raw on a non-blocking description of
// the pipe of their own (internal/rawio), so they wake no sysmon; larger
// writes block in the kernel as before.
func stdioOut(out io.Writer) io.Writer {
	if f, ok := out.(*os.File); ok {
		return rawio.SmallWrites(f, sshserve.DirectMax)
	}
	return out
}

// sameStream reports whether w is an *os.File for the same file as f (a
// socket or pipe: the same one).
func sameStream(f *os.File, w io.Writer) bool {
	g, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err1 := f.Stat()
	gi, err2 := g.Stat()
	return err1 == nil && err2 == nil && os.SameFile(fi, gi)
}

// sshIsQuiet reports whether the ssh that runs this process as its
// ProxyCommand was told to be quiet (-q, -o LogLevel=QUIET, FATAL or
// ERROR), read from its command line with the shim's parser of ssh's
// grammar: ssh tells a ProxyCommand nothing of its log level, and prints
// what it writes on stderr whatever the level. A LogLevel in an
// ssh_config file is not seen; an ssh command line that cannot be read or
// parsed is not quiet.
func sshIsQuiet() bool {
	args := parentArgs()
	if len(args) < 2 || strings.TrimSuffix(filepath.Base(args[0]), ".exe") != "ssh" {
		return false
	}
	o, err := shim.Parse(args[1:])
	return err == nil && o.LogLevel < shim.LogInfo
}

// quietUnless writes to w unless quiet, asked at the first write (a wake
// of the box; most connections have none), says so.
type quietUnless struct {
	w     io.Writer
	quiet func() bool
	once  sync.Once
	drop  bool
}

func (q *quietUnless) Write(p []byte) (int, error) {
	q.once.Do(func() { q.drop = q.quiet() })
	if q.drop {
		return len(p), nil
	}
	return q.w.Write(p)
}

// stdioDial is how --stdio reaches HOST:PORT inside box for direct-tcpip
// channels (ssh -L, -D, -W, ProxyJump): one relay Exec each.
func stdioDial(c *box.Client, boxName string) func(context.Context, string, uint32) (sshserve.Conn, error) {
	return func(ctx context.Context, host string, port uint32) (sshserve.Conn, error) {
		return relay.Dial(ctx, c, boxName, host, port)
	}
}

// sshSoftwareVersion is the software part of our SSH version line for
// module version v, such as "cocoonbox_1.2.0_rc1": RFC 4253 section 4.2
// allows no white space and no minus sign there.
func sshSoftwareVersion(v string) string {
	v = strings.TrimPrefix(v, "v")
	return "cocoonbox_" + strings.Map(func(r rune) rune {
		if r <= ' ' || r == '-' || r > '~' {
			return '_'
		}
		return r
	}, v)
}

// pinWarning is the line saying that the known_hosts file of `cocoonbox
// ssh-config` in the state directory dir does not pin key, the host key
// there, so ssh will refuse the connection: the key file was replaced, or
// the pin edited. Empty when the pin matches, or there is no such file (a
// Host block of the user's own, with a pin elsewhere).
func pinWarning(dir string, key ssh.PublicKey, advice string) string {
	path := filepath.Join(dir, knownHostsFile)
	// Bounded and never blocking: a FIFO there would hold ssh's
	// connection forever.
	rest, _, err := safefile.ReadFile(path)
	if err != nil {
		return ""
	}
	for len(rest) > 0 {
		marker, hosts, pub, _, next, err := ssh.ParseKnownHosts(rest)
		if err != nil {
			break
		}
		if marker == "" && slices.Contains(hosts, sshconfig.HostKeyAlias) && bytes.Equal(pub.Marshal(), key.Marshal()) {
			return ""
		}
		rest = next
	}
	return fmt.Sprintf("%s does not pin the host key in %s, so ssh refuses the connection; to pin the key again, run: %s",
		path, filepath.Join(dir, sshserve.HostKeyFile), advice)
}

// sshConfigAdvice is the ssh-config command line that writes the block
// this process runs under again: with its --suffix when not the default,
// and its own path (self, as the ProxyCommand named it) when absolute, so
// the advice cannot turn the user's block into another one.
func sshConfigAdvice(suffix, self string) string {
	cmd := "cocoonbox ssh-config"
	if suffix != sshconfig.DefaultSuffix {
		cmd += " --suffix " + sshconfig.ShellQuote(suffix)
	}
	if filepath.IsAbs(self) {
		cmd += " --ssh-path " + sshconfig.ShellQuote(self)
	}
	return cmd
}
