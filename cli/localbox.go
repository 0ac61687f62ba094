package cli

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/cocoonbox/cocoonbox/auth"
	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/internal/atomicfile"
	"github.com/cocoonbox/cocoonbox/internal/cores"
	"github.com/cocoonbox/cocoonbox/internal/rawio"
	"github.com/cocoonbox/cocoonbox/internal/shellquote"
	"github.com/cocoonbox/cocoonbox/localbox"
)

// localboxOptions are the flags of `cocoonbox localbox start|serve`.
type localboxOptions struct {
	// Listen is "" (the unix socket), "unix:PATH" or a loopback HOST:PORT;
	// with TLS any HOST:PORT.
	Listen string
	// TLSCert and TLSKey are a PEM certificate (with its chain) and key.
	TLSCert, TLSKey string
	// TLS is "" or "self-signed": make (or reuse) a pair in the state
	// directory.
	TLS string
	// TLSNames are more names for the self-signed certificate.
	TLSNames []string
	// UserPrefix names the Unix user made for the owner's boxes when
	// another local box on the machine holds `user` (localbox.OwnerUser).
	UserPrefix string
	// IdleHibernate is localbox.Server.IdleHibernate; 0 is off.
	IdleHibernate time.Duration
	// MaxStream, if not zero, resets each call's stream that old, as the
	// hosted service's front end does at an hour (localbox.Server.MaxStream).
	MaxStream time.Duration
	// Engine is --engine: docker, podman or process; "" is the one the
	// local box last ran with (localbox.EngineSettings).
	Engine string
	// limitFlags are each box's limits on a container engine.
	limitFlags
	// EgressAllow and EgressDeny are --egress-allow and --egress-deny.
	EgressAllow, EgressDeny hostList
}

// hostList is a flag's comma-separated hosts, remembered when given:
// given empty, it clears the remembered list.
type hostList struct {
	hosts []string
	given bool
}

func (h *hostList) String() string { return strings.Join(h.hosts, ",") }

func (h *hostList) Type() string { return "hosts" }

// Set takes the list, or refuses in one line an entry that is no host.
func (h *hostList) Set(v string) error {
	h.given = true
	for _, x := range strings.Split(v, ",") {
		if x = strings.TrimSpace(x); x == "" {
			continue
		}
		if err := localbox.CheckEgressHost(x); err != nil {
			return fmt.Errorf("%v: give host names (example.com, which covers its subdomains), IP addresses or CIDRs, comma-separated", err)
		}
		h.hosts = append(h.hosts, x)
	}
	return nil
}

// egressNeedsContainers refuses egress rules for the process engine.
func egressNeedsContainers(set localbox.EngineSettings) error {
	if set.Egress.Ruled() && (set.Engine == "" || set.Engine == localbox.EngineProcess) {
		return &UsageError{errors.New("--egress-allow and --egress-deny rule a container engine's boxes: add --engine docker or --engine podman (the process engine's boxes use the host's network as it is)")}
	}
	return nil
}

// egressSet reports whether --egress-allow or --egress-deny was given.
func (o localboxOptions) egressSet() bool { return o.EgressAllow.given || o.EgressDeny.given }

// applyEgress puts the egress lists given in g.
func (o localboxOptions) applyEgress(g *localbox.Egress) {
	if o.EgressAllow.given {
		g.Allow = o.EgressAllow.hosts
	}
	if o.EgressDeny.given {
		g.Deny = o.EgressDeny.hosts
	}
}

// limitFlags are --box-memory, --box-cpus and --box-pids: limits of a
// box on a container engine; zero keeps the remembered ones.
type limitFlags struct {
	Memory string
	CPUs   float64
	Pids   int64
}

// minBoxMemory is the least memory a container engine gives a container
// (docker refuses less than 6 MiB).
const minBoxMemory = 6 << 20

// set reports whether any limit was given.
func (f limitFlags) set() bool { return f.Memory != "" || f.CPUs != 0 || f.Pids != 0 }

// apply puts the limits given in l, or says in one line which is bad
// (a UsageError).
func (f limitFlags) apply(l *localbox.Limits) error {
	if f.Memory != "" {
		n, err := units.RAMInBytes(f.Memory)
		if err != nil || n <= 0 {
			return &UsageError{fmt.Errorf("--box-memory %q: give a size such as 2g or 512m", f.Memory)}
		}
		if n < minBoxMemory {
			return &UsageError{fmt.Errorf("--box-memory %q: a container engine gives a box 6m at least; give a size such as 2g or 512m", f.Memory)}
		}
		l.MemoryBytes = n
	}
	switch {
	case !(f.CPUs >= 0) || (f.CPUs > 0 && f.CPUs < 0.01): // NaN too
		return &UsageError{fmt.Errorf("--box-cpus %g: give a number of CPUs from 0.01 to %d (this machine's)", f.CPUs, runtime.NumCPU())}
	case f.CPUs > float64(runtime.NumCPU()):
		return &UsageError{fmt.Errorf("--box-cpus %g: this machine has %d CPUs; give 0.01 to %d", f.CPUs, runtime.NumCPU(), runtime.NumCPU())}
	case f.Pids < 0:
		return &UsageError{fmt.Errorf("--box-pids %d: give a positive number of processes, such as 1024", f.Pids)}
	}
	if f.CPUs > 0 {
		l.NanoCPUs = int64(f.CPUs * 1e9)
	}
	if f.Pids > 0 {
		l.Pids = f.Pids
	}
	return nil
}

// settings is set, the engine settings a local box remembers, changed
// by o's --engine, limits and egress rules, each checked (a UsageError
// names the flag and what to give). given reports whether o gave any of
// them. It reads nothing and asks no engine: start runs it before it
// makes any state, so that a refused flag leaves none, and serve through
// engineSettings.
func (o localboxOptions) settings(set localbox.EngineSettings) (_ localbox.EngineSettings, given bool, err error) {
	if o.Engine == "" && !o.limitFlags.set() && !o.egressSet() {
		return set, false, nil
	}
	if o.Engine != "" {
		if err := localbox.CheckEngine(o.Engine); err != nil {
			return set, false, &UsageError{err}
		}
		set.Engine = o.Engine
	}
	if err := o.limitFlags.apply(&set.Limits); err != nil {
		return set, false, err
	}
	o.applyEgress(&set.Egress)
	if err := egressNeedsContainers(set); err != nil {
		return set, false, err
	}
	return set, true, nil
}

// engineSettings is the engine the local box in dir serves with: the
// one it remembers, changed by o (settings), once the engine answers.
// remember says whether o gave an engine, limits or egress rules, for
// the caller to save (localbox.SaveEngineSettings) once the local box
// serves: a start that fails, on an engine that is not there or later,
// leaves the remembered one as it was.
func (o localboxOptions) engineSettings(dir string) (set localbox.EngineSettings, remember bool, err error) {
	if set, err = localbox.ReadEngineSettings(dir); err != nil {
		return set, false, err
	}
	set, remember, err = o.settings(set)
	if err != nil || !remember {
		return set, false, err
	}
	if err := localbox.CheckEngineAnswers(set); err != nil {
		return set, false, err
	}
	return set, true, nil
}

// runsAs refuses o's --engine, limits and egress rules when the local
// box ri, which runs, serves with others: they are read at a start, so
// taking it as it is would drop them in silence.
func (o localboxOptions) runsAs(dir string, ri localbox.Runtime) error {
	set, err := localbox.ReadEngineSettings(dir)
	if err != nil {
		return err
	}
	want, given, err := o.settings(set)
	if err != nil || !given {
		return err
	}
	running := cmp.Or(ri.Engine, set.Engine)
	if o.Engine != "" && o.Engine != running {
		return fmt.Errorf("a local box already runs on the %s engine, not %s\nto change its engine, stop it first: cocoonbox localbox stop", running, o.Engine)
	}
	if want.Limits != set.Limits {
		return errors.New("a local box already runs with other box limits\nto change them, stop it first: cocoonbox localbox stop")
	}
	if !slices.Equal(want.Egress.Allow, set.Egress.Allow) || !slices.Equal(want.Egress.Deny, set.Egress.Deny) {
		return errors.New("a local box already runs with other egress rules\nto change them, stop it first: cocoonbox localbox stop")
	}
	return nil
}

// engineArgs are o's engine flags for the serve that start runs.
func (o localboxOptions) engineArgs() []string {
	var a []string
	if o.Engine != "" {
		a = append(a, "--engine", o.Engine)
	}
	if o.Memory != "" {
		a = append(a, "--box-memory", o.Memory)
	}
	if o.CPUs > 0 {
		a = append(a, "--box-cpus", fmt.Sprint(o.CPUs))
	}
	if o.Pids > 0 {
		a = append(a, "--box-pids", fmt.Sprint(o.Pids))
	}
	if o.EgressAllow.given {
		a = append(a, "--egress-allow="+o.EgressAllow.String())
	}
	if o.EgressDeny.given {
		a = append(a, "--egress-deny="+o.EgressDeny.String())
	}
	return a
}

// tls reports whether the options ask for TLS, and checks them.
func (o localboxOptions) tls() (bool, error) {
	switch {
	case o.MaxStream < 0:
		return false, &UsageError{fmt.Errorf("--max-stream %s: give a positive duration such as 1h, or 0 for no cap", o.MaxStream)}
	case o.TLS != "" && o.TLS != "self-signed":
		return false, &UsageError{fmt.Errorf("--tls %q: the only value is self-signed; for your own certificate give --tls-cert FILE --tls-key FILE", o.TLS)}
	case o.TLS != "" && (o.TLSCert != "" || o.TLSKey != ""):
		return false, &UsageError{errors.New("--tls self-signed and --tls-cert/--tls-key exclude each other: give one")}
	case (o.TLSCert == "") != (o.TLSKey == ""):
		return false, &UsageError{errors.New("--tls-cert and --tls-key go together: give both")}
	case len(o.TLSNames) > 0 && o.TLS == "":
		return false, &UsageError{errors.New("--tls-name is for --tls self-signed; a certificate you give has its own names")}
	}
	on := o.TLS != "" || o.TLSCert != ""
	if on && (o.Listen == "" || strings.HasPrefix(o.Listen, "unix:")) {
		return false, &UsageError{errors.New("TLS needs a TCP listener: add --listen HOST:PORT (0.0.0.0:PORT for every address)")}
	}
	return on, nil
}

// runAsLine is the one line start and status say about the Unix user box
// commands run as: served by root, the owner's box user (`user`, or one
// made for this local box when another holds `user`); served by another
// user, that user, and that accounts need root.
func runAsLine(ri localbox.Runtime) string {
	line := "box commands run as the Unix user `" + ri.RunAs + "`"
	if ri.RunAsNote != "" {
		line += ", " + ri.RunAsNote
	}
	return line
}

// nonRootNote is what runAsLine adds for a local box not served by root.
const nonRootNote = "who serves the local box: one account, the owner's (accounts need a local box served by root)"

// rootLine is the one line start and serve fail with, served by root,
// when no box user can serve the boxes: why (localbox.OwnerUser's error) names the
// first directory closed to it and the next step.
func rootLine(why string) string {
	return "served by root, the local box runs box commands only as an unprivileged box user, never as root:\n" + why
}

func newLocalbox(env Env, s Streams) *cobra.Command {
	var o localboxOptions
	lb := &cobra.Command{
		Use:   "localbox",
		Short: "Run the cocoonbox API on this machine, with boxes as directories",
		Long: `localbox serves the cocoonbox API from this machine: boxes are directories
under $XDG_STATE_HOME/cocoonbox/localbox, commands run as local processes.
"start" runs it in the background and makes it the current endpoint, so
every cocoonbox command, cocoonbox-ssh and git's cocoonbox:: URLs use it with
no account.`,
		Args: usageArgs(cobra.NoArgs),
	}
	listen := func(c *cobra.Command) {
		c.Flags().StringVar(&o.Listen, "listen", "", "unix:PATH or a loopback HOST:PORT; with TLS any HOST:PORT (default: a unix socket in the state directory)")
		c.Flags().StringVar(&o.TLSCert, "tls-cert", "", "serve TLS with this PEM certificate (and chain); needs --tls-key")
		c.Flags().StringVar(&o.TLSKey, "tls-key", "", "the PEM private key of --tls-cert")
		c.Flags().StringVar(&o.TLS, "tls", "", "self-signed: serve TLS with a certificate made (or kept) in the state directory")
		c.Flags().StringSliceVar(&o.TLSNames, "tls-name", nil, "another DNS name or IP address for the self-signed certificate (repeatable)")
		c.Flags().StringVar(&o.Engine, "engine", "", "what boxes run on: docker or podman (a container per box, of the image \"localbox image build\" makes), or process (directories and host processes); default: the engine of the last start, else process")
		c.Flags().StringVar(&o.Memory, "box-memory", "", "each box's memory on a container engine, such as 2g (remembered; default 2g)")
		c.Flags().Float64Var(&o.CPUs, "box-cpus", 0, "each box's CPUs on a container engine (remembered; default 2)")
		c.Flags().Int64Var(&o.Pids, "box-pids", 0, "each box's processes and threads on a container engine (remembered; default 1024)")
		c.Flags().Var(&o.EgressAllow, "egress-allow", "on a container engine, the only hosts boxes reach, through the local box's proxy: names (covering their subdomains), addresses or CIDRs, comma-separated (remembered; \"\" clears; default every host)")
		c.Flags().Var(&o.EgressDeny, "egress-deny", "on a container engine, hosts boxes never reach (remembered; \"\" clears); with either list set, boxes reach the network only through the proxy")
		c.Flags().DurationVar(&o.IdleHibernate, "idle-hibernate", 0, "hibernate a running box after this long without a client call, unless an offloaded session in it works (0: never)")
		c.Flags().StringVar(&o.UserPrefix, "user-prefix", localbox.DefaultUserPrefix, "served by root while another local box holds the Unix user \"user\": what the user made for the owner's boxes is named with, before owner_HASH")
		c.Flags().DurationVar(&o.MaxStream, "max-stream", 0, "reset each call's stream this old (e.g. 1h, as the hosted service's front end does; 0: never), both ways, as a load balancer does")
	}
	serve := noArgsCommand("serve", "Run the local box in the foreground", func() error { return runLocalboxServe(env, s, o) })
	serve.Long = `serve runs the local box in the foreground, its log on stderr, until SIGINT or
SIGTERM; SIGHUP re-reads its accounts and tokens. One local box serves a state
directory: a second serve is refused. "start" runs it in the background.`
	listen(serve)
	start := noArgsCommand("start", "Start the local box in the background and make it the current endpoint",
		func() error { return runLocalboxStart(env, s, o) })
	start.Long = `start runs "localbox serve" in the background (its log in the state directory,
localbox.log), waits until it answers, and makes it the current endpoint: a
token for this CLI and the endpoint are saved, so that every cocoonbox command,
cocoonbox-ssh and git's cocoonbox:: URLs use it with no login.

What start remembers for the next plain start: --listen and the TLS flags
(listen.json; "--listen unix:" goes back to the socket alone), and, once the
local box serves, --engine, the box limits and the egress rules (engine.json).
--idle-hibernate, --max-stream and --user-prefix hold for this start only.

Run while the local box runs, start makes it the current endpoint again,
wherever it listens, and changes nothing: given another --listen, --engine,
box limits or egress rules it is refused (exit 1); stop it first with
"cocoonbox localbox stop". A flag that is wrong is refused (exit 2) before
anything is made. When the local box exits at start, start prints the reason
from its log.

The state directory is $XDG_STATE_HOME/cocoonbox/localbox
(~/.local/state/cocoonbox/localbox by default).`
	listen(start)
	dial := func() (*box.Client, error) { return running(env) }
	var statusJSON bool
	status := noArgsCommand("status", "Say whether the local box runs, which Unix user box commands run as, and list its boxes (exit 1 when it does not run)",
		func() error { return runLocalboxStatus(env, s, statusJSON) })
	status.Flags().BoolVar(&statusJSON, "json", false, "print one JSON object: running, endpoint, pid, state_dir, fingerprint, run_as, boxes")
	sleep := boxCommand(s, dial, "sleep BOX", "Hibernate a box of the local box; the next command wakes it", sleepBox)
	wake := boxCommand(s, dial, "wake BOX", "Wake a box of the local box", wakeBox)
	sleep.ValidArgsFunction = onlyFirst(boxNamesAt(dial))
	wake.ValidArgsFunction = sleep.ValidArgsFunction
	lb.AddCommand(serve, start, newLocalboxAccount(env, s), newLocalboxPurge(env, s), newLocalboxImage(s),
		noArgsCommand("stop", "Stop the local box", func() error { return runLocalboxStop(env, s) }),
		status, sleep, wake)
	return lb
}

func localboxDir(env Env) (string, error) {
	d, err := env.stateDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "localbox"), nil
}

// mkdirState is localbox.MkdirState; when a directory cannot be made its
// error names the state directory and the variables that move it.
func mkdirState(env Env, dir string) error {
	err := localbox.MkdirState(dir)
	if _, ok := errors.AsType[*fs.PathError](err); ok {
		return fmt.Errorf("cannot make the local box's state directory %s (%v): %s", dir, err, movedBy(env, "XDG_STATE_HOME"))
	}
	return err
}

// mkdirConfig makes the configuration directory, where start saves the
// local box as the current endpoint with its token; when it cannot, the
// error names it and the variables that move it.
func mkdirConfig(env Env) error {
	d, err := env.configDir()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(d, 0o700); err != nil {
		return fmt.Errorf("cannot make the configuration directory %s, where start saves the local box as the current endpoint (%v): %s", d, err, movedBy(env, "XDG_CONFIG_HOME"))
	}
	return nil
}

// movedBy is the next step for a directory under HOME, or under the
// variable xdg that moves it, that could not be made.
func movedBy(env Env, xdg string) string {
	if d := env.Getenv(xdg); d != "" && filepath.IsAbs(d) {
		return "set " + xdg + " to a directory you can write"
	}
	return "set HOME to a directory you can write, or " + xdg
}

func runLocalboxServe(env Env, s Streams, o localboxOptions) error {
	dir, err := localboxDir(env)
	if err != nil {
		return err
	}
	if err := mkdirState(env, dir); err != nil {
		return err
	}
	// One local box per state directory: the lock is held while this
	// process lives, so a second serve is refused and only the holder
	// writes and removes localbox.json.
	logger := log.New(s.Err, "localbox: ", log.LstdFlags)
	lock, err := localbox.Lock(dir)
	if errors.Is(err, localbox.ErrServing) {
		pid := "another process"
		if ri, ok := localbox.ReadRuntime(dir); ok {
			pid = fmt.Sprintf("pid %d, at %s", ri.PID, ri.Endpoint)
		}
		return fmt.Errorf("a local box already serves %s (%s)\nstop it first with: cocoonbox localbox stop", dir, pid)
	}
	if err != nil {
		return err
	}
	defer lock.Close()
	ri := localbox.Runtime{PID: os.Getpid()}
	var tc *tls.Config
	if on, err := o.tls(); err != nil {
		return err
	} else if on {
		var change localbox.CertChange
		if tc, ri.CA, change, err = serverTLS(dir, o, logger); err != nil {
			return err
		}
		ri.Fingerprint = localbox.Fingerprint(tc)
		ri.NewCA, ri.ReplacedCA = change != localbox.CertKept, change == localbox.CertReplaced
	}
	var lis net.Listener
	if tc != nil {
		host := "localhost"
		if ri.CA == "" {
			host = localbox.LocalName(tc)
		}
		lis, ri.Endpoint, err = localbox.ListenTLS(o.Listen, host)
		if err == nil {
			ri.Laptop = laptopEndpoint(ri.Endpoint, o.Listen, tc, ri.CA != "")
		}
	} else {
		lis, ri.Endpoint, err = localbox.Listen(dir, o.Listen)
	}
	if err != nil {
		return err
	}
	url := ri.Endpoint
	exe, err := os.Executable()
	if err != nil {
		lis.Close()
		return err
	}
	if err := localbox.CheckBinOwner(exe); err != nil {
		lis.Close()
		return err
	}
	// No two local boxes on this machine run boxes as one Unix user: the
	// owner's box user is this one's alone (docs/self-hosting.md
	// "Accounts"), and never root: a box command run as root would own
	// the machine (docs/security.md "The box boundary").
	eng, rememberEngine, err := o.engineSettings(dir)
	if err != nil {
		lis.Close()
		return err
	}
	// A container engine runs box commands as the box image's user in
	// each box's container: no Unix user of this machine.
	boxUser, note := "", ""
	if eng.Engine == localbox.EngineProcess {
		boxUser, note, err = localbox.OwnerUser(claimsDir(env), dir, filepath.Dir(exe), o.UserPrefix)
		if err != nil {
			lis.Close()
			return errors.New(rootLine(err.Error()))
		}
	} else {
		note = "uid 1000 in each box's own container (engine " + eng.Engine + ")"
	}
	ri.RunAs, ri.RunAsNote, ri.Engine = boxUser, note, eng.Engine
	if eng.Engine != localbox.EngineProcess {
		ri.RunAs = "user"
	} else if boxUser == "" {
		if me, err := user.Current(); err == nil {
			ri.RunAs, ri.RunAsNote = me.Username, nonRootNote
		}
	}
	srv := &localbox.Server{Dir: dir, BinDir: filepath.Dir(exe), Logf: logger.Printf, TLS: tc, User: boxUser, Engine: eng, IdleHibernate: o.IdleHibernate, MaxStream: o.MaxStream}
	if rememberEngine {
		srv.Serving = func() {
			if err := localbox.SaveEngineSettings(dir, eng); err != nil {
				logger.Printf("remember the engine: %v", err)
			}
		}
	}
	if err := localbox.WriteRuntime(dir, ri); err != nil {
		lis.Close()
		return err
	}
	defer localbox.RemoveRuntime(dir)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	// SIGHUP re-reads the accounts and tokens, as `localbox account remove`
	// asks, as sshd re-reads its configuration.
	hups := make(chan os.Signal, 1)
	signal.Notify(hups, syscall.SIGHUP)
	defer signal.Stop(hups)
	go func() {
		for range hups {
			if err := srv.Reload(); err != nil {
				logger.Printf("reload: %v", err)
			}
		}
	}()
	// Serve returns as soon as Stop closes the listener; the process must
	// not exit before Stop has also ended the boxes' inboxes and tmux.
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if sig, ok := <-sigs; ok {
			logger.Printf("%v: stopping", sig)
			srv.Stop()
		}
	}()
	defer func() {
		signal.Stop(sigs)
		close(sigs)
		<-stopped
	}()
	logger.Printf("endpoint %s, state %s", url, dir)
	logger.Printf("%s", runAsLine(ri))
	if ri.Fingerprint != "" {
		logger.Printf("TLS certificate for %s, SHA-256 fingerprint %s", strings.Join(localbox.CertNames(tc), ", "), ri.Fingerprint)
		if ri.CA != "" {
			logger.Printf("a laptop trusts it with: cocoonbox login --endpoint %s --ca FILE, FILE a copy of %s", cmp.Or(ri.Laptop, url), ri.CA)
		}
	}
	if !strings.HasPrefix(url, "unix://") {
		logger.Printf("browser sign-in: cocoonbox login --endpoint %s; the owner's code is in %s", url, localbox.SignInCodePath(dir))
	}
	// A relay of each command's pipes to its Exec: one P while requests
	// come one at a time (an sftp request's round trip: a third less CPU
	// and two context switches fewer each, docs/benchmarks.md), every
	// core once calls queue for it.
	defer cores.Follow()()
	// Its sockets' reads and writes wake no sysmon (internal/rawio).
	return srv.Serve(rawio.Listener(lis))
}

func runLocalboxStart(env Env, s Streams, o localboxOptions) error {
	dir, err := localboxDir(env)
	if err != nil {
		return err
	}
	// Nor does start take the endpoint and token of a local box it finds
	// running in such a directory.
	if err := checkStateOwner(dir); err != nil {
		return err
	}
	if ri, ok := localbox.ReadRuntime(dir); ok {
		if done, err := takeRunning(env, s, dir, o, ri); done {
			return err
		}
	}
	// Its engine flags are checked before any state is made, so that a
	// refused one leaves none; serve checks them again, with the engine.
	// A remembered file that cannot be read is serve's to report, once
	// mkdirState has said what it could not make.
	prev, _ := localbox.ReadEngineSettings(dir)
	if _, _, err := o.settings(prev); err != nil {
		return err
	}
	if err := mkdirState(env, dir); err != nil {
		return err
	}
	// Made now, not once the local box serves: there start could not
	// save it as the current endpoint, and waited for nothing.
	if err := mkdirConfig(env); err != nil {
		return err
	}
	if o, err = o.remembered(dir, s); err != nil {
		return err
	}
	if _, err := o.tls(); err != nil {
		return err
	}
	switched := engineSwitchLines(dir, o.Engine)
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	args := []string{"cocoonbox", "localbox", "serve"}
	if o.Listen != "" {
		args = append(args, "--listen", o.Listen)
	}
	for flag, file := range map[string]string{"--tls-cert": o.TLSCert, "--tls-key": o.TLSKey} {
		if file != "" {
			abs, err := filepath.Abs(file)
			if err != nil {
				return err
			}
			args = append(args, flag, abs)
		}
	}
	if o.TLS != "" {
		args = append(args, "--tls", o.TLS)
	}
	for _, n := range o.TLSNames {
		args = append(args, "--tls-name", n)
	}
	if o.UserPrefix != localbox.DefaultUserPrefix {
		args = append(args, "--user-prefix", o.UserPrefix)
	}
	if o.IdleHibernate > 0 {
		args = append(args, "--idle-hibernate", o.IdleHibernate.String())
	}
	if o.MaxStream != 0 {
		args = append(args, "--max-stream", o.MaxStream.String())
	}
	args = append(args, o.engineArgs()...)
	var certErr *box.CertError
	var pinned string
	var nameErr error
	// adoptErr is why the local box, serving at adoptAt, was last not
	// taken: start's own failure, which its log does not hold.
	var adoptErr error
	var adoptAt string
	ri, err := localbox.Start(dir, &exec.Cmd{Path: exe, Args: args, Env: env.Environ}, func(ri localbox.Runtime) bool {
		if nameErr = unresolved(ri.Endpoint); nameErr != nil {
			return true
		}
		err := adopt(env, dir, ri)
		certErr, _ = errors.AsType[*box.CertError](err)
		if certErr != nil && o.TLSCert != "" && env.Getenv("COCOONBOX_CA_FILE") == "" {
			pinned, err = adoptPinned(env, dir, ri, o.TLSCert, err)
			certErr, _ = errors.AsType[*box.CertError](err)
		}
		adoptErr, adoptAt = err, ri.Endpoint
		return err == nil || certErr != nil
	})
	if err != nil && adoptErr != nil && !errors.Is(adoptErr, box.ErrUnavailable) && !errors.Is(adoptErr, context.DeadlineExceeded) {
		return fmt.Errorf("start could not make the local box the current endpoint: %v\nit served at %s; start stopped it", adoptErr, adoptAt)
	}
	if err == nil {
		l := o.listening()
		l.Endpoint = ri.Endpoint
		err = localbox.SaveListening(dir, l)
	}
	switch {
	case err != nil:
		return err
	case nameErr != nil:
		// It serves; this computer only cannot name it.
		fmt.Fprintf(s.Err, "local box running at %s (pid %d), but %v, so the current endpoint is unchanged; laptops that resolve the name use it, and this computer can with --listen 127.0.0.1:PORT and a certificate for 127.0.0.1 or localhost\n", ri.Endpoint, ri.PID, nameErr)
		return nil
	case certErr != nil:
		// It serves; this computer only does not trust it.
		fmt.Fprintf(s.Err, "local box running at %s (pid %d), but this computer does not trust its certificate, so the current endpoint is unchanged: %v\n", ri.Endpoint, ri.PID, certErr)
		return nil
	}
	fmt.Fprintf(s.Err, "local box running at %s (pid %d); it is now the current endpoint\n", ri.Endpoint, ri.PID)
	if pinned != "" {
		fmt.Fprintf(s.Err, "this computer does not trust its certificate's CA, so the certificate given is pinned for this endpoint in %s, as `cocoonbox login --ca` would; laptops pin their copy of the CA (docs/self-hosting.md)\n", pinned)
	}
	fmt.Fprintln(s.Err, runAsLine(ri))
	if ri.Fingerprint != "" {
		fmt.Fprintf(s.Err, "TLS certificate SHA-256 fingerprint %s\n", ri.Fingerprint)
	}
	if ri.NewCA {
		fmt.Fprintln(s.Err, newCertLine(ri.CA, ri.ReplacedCA))
	}
	if ri.CA != "" {
		fmt.Fprintf(s.Err, "a laptop trusts it with: cocoonbox login --endpoint %s --ca FILE, FILE a copy of %s (docs/self-hosting.md)\n", cmp.Or(ri.Laptop, ri.Endpoint), ri.CA)
	}
	for _, l := range switched {
		fmt.Fprintln(s.Err, l)
	}
	return nil
}

// takeRunning makes the local box ri, which ReadRuntime found serving
// dir, the current endpoint, unless o asks of it what it does not do.
// With no --listen, start takes the local box that runs, wherever it
// listens: "start" is the way back in from every state. done is false
// when ri died as start reached it, for start to start another.
func takeRunning(env Env, s Streams, dir string, o localboxOptions, ri localbox.Runtime) (done bool, err error) {
	if want := listenURL(dir, o); o.Listen != "" && want != "" && want != ri.Endpoint {
		return true, fmt.Errorf("a local box already runs at %s, not %s\nto move it, stop it first: cocoonbox localbox stop", ri.Endpoint, want)
	}
	if err := o.runsAs(dir, ri); err != nil {
		return true, err
	}
	if err := adopt(env, dir, ri); err != nil {
		if errors.Is(err, box.ErrUnavailable) && died(dir) {
			return false, nil
		}
		return true, err
	}
	fmt.Fprintf(s.Err, "local box already running at %s (pid %d); it is the current endpoint\n", ri.Endpoint, ri.PID)
	if ri.RunAs != "" {
		fmt.Fprintln(s.Err, runAsLine(ri))
	}
	return true, nil
}

// deathWait is how long died waits for a local box that does not answer
// to be gone.
const deathWait = 5 * time.Second

// died reports whether the local box of dir, which did not answer, stops
// serving within deathWait. One killed a moment ago (kill -9) still holds
// its lock and its listener while the kernel closes its descriptors, the
// connections' first (a client of it sees its end) and the lock's last:
// a start in between connects, and is reset when the listener closes.
func died(dir string) bool {
	for end := time.Now().Add(deathWait); ; time.Sleep(20 * time.Millisecond) {
		if _, ok := localbox.ReadRuntime(dir); !ok {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}

// engineSwitchLines warn a start that moves the local box in dir to the
// engine to that no box's files move with it: the owner's boxes find
// none of the files they made on the engine they ran on, which keeps
// them. The second line is how to copy them over, or go back. None when
// the engine stays or there is no box.
func engineSwitchLines(dir, to string) []string {
	set, err := localbox.ReadEngineSettings(dir)
	names := localbox.BoxNames(dir)
	if to == "" || err != nil || set.Engine == to || len(names) == 0 {
		return nil
	}
	from := set.Engine
	// "box main finds none of the files it made", or "the boxes main,
	// dev find none of the files they made".
	boxesFind := "box " + names[0] + " finds none of the files it made"
	if len(names) > 1 {
		boxesFind = "the boxes " + strings.Join(names, ", ") + " find none of the files they made"
	}
	back := "`cocoonbox localbox stop; cocoonbox localbox start --engine " + from + "`"
	if from == localbox.EngineProcess {
		boxes := filepath.Join(dir, "boxes")
		return []string{
			fmt.Sprintf("cocoonbox: warning: on %s %s on the process engine: those stay in %s/BOX/home and workspace", to, boxesFind, boxes),
			fmt.Sprintf("copy a workspace in with `rsync -a -e cocoonbox-ssh %s/ %s:`, or go back with %s", shellquote.Word(filepath.Join(boxes, names[0], "workspace")), names[0], back),
		}
	}
	return []string{
		fmt.Sprintf("cocoonbox: warning: on %s %s on %s: those stay in its volumes", to, boxesFind, from),
		fmt.Sprintf("to bring them here, go back with %s, copy them out (`rsync -a -e cocoonbox-ssh %s: DIR/`), then switch again", back, names[0]),
	}
}

// listening is o's --listen and TLS flags, the files' paths absolute;
// "unix:" (the default socket) is the default's zero value.
func (o localboxOptions) listening() localbox.Listening {
	if o.Listen == "unix:" || o.Listen == "unix://" {
		o.Listen = ""
	}
	abs := func(f string) string {
		if a, err := filepath.Abs(f); f != "" && err == nil {
			return a
		}
		return f
	}
	return localbox.Listening{Listen: o.Listen, TLS: o.TLS, TLSCert: abs(o.TLSCert), TLSKey: abs(o.TLSKey), TLSNames: o.TLSNames}
}

// remembered is o for a start: as given when it names a listener or TLS;
// else with the --listen and TLS flags of the last start that gave them
// (localbox.Listening), said in one line on s.Err with how to change
// them, so that a plain start after a TLS one does not cut the laptops
// off in silence.
func (o localboxOptions) remembered(dir string, s Streams) (localboxOptions, error) {
	if o.Listen != "" || o.TLS != "" || o.TLSCert != "" || o.TLSKey != "" || len(o.TLSNames) > 0 {
		return o, nil
	}
	l, err := localbox.ReadListening(dir)
	if err != nil || l.Listen == "" {
		return o, err
	}
	o.Listen, o.TLS, o.TLSCert, o.TLSKey, o.TLSNames = l.Listen, l.TLS, l.TLSCert, l.TLSKey, l.TLSNames
	fmt.Fprintf(s.Err, "listening as the last start did: %s (%s); to change it, give --listen and --tls yourself (--listen unix: for the socket alone)\n",
		strings.Join(o.flags(), " "), localbox.ListeningPath(dir))
	return o, nil
}

// flags is o's --listen and TLS flags as they are typed.
func (o localboxOptions) flags() []string {
	var f []string
	add := func(flag, v string) {
		if v != "" {
			f = append(f, flag, shellquote.Word(v))
		}
	}
	add("--listen", o.Listen)
	add("--tls", o.TLS)
	add("--tls-cert", o.TLSCert)
	add("--tls-key", o.TLSKey)
	for _, n := range o.TLSNames {
		add("--tls-name", n)
	}
	return f
}

// listenURL is the endpoint --listen asks for, or "" when it cannot be
// known before listening (port 0, or TLS on an unspecified address).
func listenURL(dir string, o localboxOptions) string {
	listen := o.Listen
	if on, _ := o.tls(); on {
		h, p, err := net.SplitHostPort(listen)
		if err != nil || p == "0" || localbox.EveryAddress(h) {
			return ""
		}
		return "https://" + listen
	}
	switch {
	case listen == "":
		return "unix://" + localbox.SocketPath(dir)
	case strings.HasPrefix(listen, "unix:"):
		return "unix://" + strings.TrimPrefix(strings.TrimPrefix(listen, "unix:"), "//")
	case strings.HasSuffix(listen, ":0"):
		return ""
	}
	return "http://" + listen
}

// adopt makes the local box ri the current endpoint, with a token it
// accepts saved for it (and its self-signed certificate pinned), and checks
// that it answers.
func adopt(env Env, dir string, ri localbox.Runtime) error {
	ep, err := localEndpoint(env, ri)
	if err != nil {
		return err
	}
	c, err := localClient(env, dir, ep)
	if err != nil {
		return err
	}
	defer c.Close()
	cfgDir, err := env.configDir()
	if err != nil {
		return err
	}
	return box.SaveConfig(cfgDir, box.Config{Endpoint: ep.URL})
}

// adoptPinned adopts the local box ri, served with the certificate file
// cert that this computer's roots do not vouch for (certErr), with the
// certificate pinned as the endpoint's CA: the owner named the file, and
// the server is the one just started. What is pinned is the file's first
// certificate alone, and only when it is the one the server presents in a
// handshake (what the file says now may not be what the server loaded);
// no other block of the file (a key, another CA) is copied. It returns
// the pin's path. When that cannot be, or adopt still fails, the
// endpoint's earlier pin (or none) stays or is put back, and the error is
// certErr or adopt's.
func adoptPinned(env Env, dir string, ri localbox.Runtime, cert string, certErr error) (string, error) {
	ep, err := box.ParseEndpoint(ri.Endpoint)
	if err != nil {
		return "", err
	}
	cfgDir, err := env.configDir()
	if err != nil {
		return "", err
	}
	leaf, err := servedLeaf(ep, cert)
	if err != nil {
		return "", certErr
	}
	var before []byte
	if p := box.WithCA(ep, env.Getenv).CAFile; p != "" {
		if before, err = os.ReadFile(p); err != nil {
			return "", err
		}
	}
	p, err := box.PinCA(cfgDir, ep, leaf)
	if err != nil {
		return "", err
	}
	if err := adopt(env, dir, ri); err != nil {
		if before != nil {
			box.PinCA(cfgDir, ep, before)
		} else {
			os.Remove(p)
		}
		return "", err
	}
	return p, nil
}

// unresolved is the reason this computer cannot reach the https
// endpoint ep by its host name (a wildcard, or a public name that does not
// resolve here: the first name of a certificate of one's own on every
// address), or nil.
func unresolved(endpoint string) error {
	ep, err := box.ParseEndpoint(endpoint)
	if err != nil || !ep.TLS {
		return nil
	}
	host, _, err := net.SplitHostPort(ep.Target)
	if err != nil || net.ParseIP(host) != nil {
		return nil
	}
	if strings.Contains(host, "*") {
		return fmt.Errorf("its certificate names no host of this computer (%s is a wildcard)", host)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := net.DefaultResolver.LookupHost(ctx, host); err != nil {
		return fmt.Errorf("this computer cannot resolve %s, the name its certificate gives it (%v)", host, err)
	}
	return nil
}

// servedLeaf is the first certificate of the PEM file cert, PEM-encoded,
// when the server at ep presents it in a handshake, and an error
// otherwise. The handshake checks nothing else: it only reads what is
// served.
func servedLeaf(ep box.Endpoint, cert string) ([]byte, error) {
	b, err := os.ReadFile(cert)
	if err != nil {
		return nil, err
	}
	var first *pem.Block
	for rest := b; first == nil; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			return nil, fmt.Errorf("%s holds no certificate", cert)
		}
		if blk.Type == "CERTIFICATE" {
			first = blk
		}
	}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ep.Target, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if pc := c.ConnectionState().PeerCertificates; len(pc) == 0 || !bytes.Equal(pc[0].Raw, first.Bytes) {
		return nil, fmt.Errorf("the server at %s presents another certificate than %s", ep.URL, cert)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: first.Bytes}), nil
}

// localEndpoint is the endpoint of the local box ri, with its self-signed
// certificate pinned in the configuration directory, so that every client
// of this user trusts it.
func localEndpoint(env Env, ri localbox.Runtime) (box.Endpoint, error) {
	ep, err := box.ParseEndpoint(ri.Endpoint)
	if err != nil {
		return ep, err
	}
	if ri.CA != "" && env.Getenv("COCOONBOX_CA_FILE") == "" {
		pem, err := os.ReadFile(ri.CA)
		if err != nil {
			return ep, err
		}
		cfgDir, err := env.configDir()
		if err != nil {
			return ep, err
		}
		if _, err := box.PinCA(cfgDir, ep, pem); err != nil {
			return ep, err
		}
	}
	return box.WithCA(ep, env.Getenv), nil
}

// laptopEndpoint is Runtime.Laptop for a server of tc at endpoint u,
// listening on listen: the endpoint other computers name it by, when it
// is not u. Only a server on every address has one: for a self-signed
// certificate (named localhost here), this machine's host name; for one
// of the owner's, the first of its names that is neither a loopback name
// nor a wildcard. A loopback listen leaves u the only one that answers
// (from another machine, through a forwarded port).
func laptopEndpoint(u, listen string, tc *tls.Config, selfSigned bool) string {
	lh, _, err := net.SplitHostPort(listen)
	if err != nil || !localbox.EveryAddress(lh) {
		return ""
	}
	ep, err := box.ParseEndpoint(u)
	h, p, err2 := net.SplitHostPort(ep.Target)
	if err != nil || err2 != nil {
		return ""
	}
	name := ""
	if selfSigned {
		if n, err := os.Hostname(); err == nil && isLoopbackName(h) {
			name = n
		}
	} else {
		for _, n := range localbox.CertNames(tc) {
			if !isLoopbackName(n) && !strings.HasPrefix(n, "*") {
				name = n
				break
			}
		}
	}
	if name == "" || name == h {
		return ""
	}
	return "https://" + net.JoinHostPort(name, p)
}

func isLoopbackName(h string) bool {
	ip := net.ParseIP(h)
	return h == "localhost" || ip != nil && ip.IsLoopback()
}

// serverTLS is the TLS configuration o asks for, with the self-signed
// certificate's path (empty for one the user gave) and what was done to
// it now.
func serverTLS(dir string, o localboxOptions, logger *log.Logger) (*tls.Config, string, localbox.CertChange, error) {
	if o.TLS == "" {
		tc, err := localbox.LoadTLS(o.TLSCert, o.TLSKey)
		return tc, "", localbox.CertKept, err
	}
	host, _, _ := net.SplitHostPort(o.Listen)
	cert, key, change, err := localbox.SelfSigned(dir, localbox.SelfSignedNames(host, o.TLSNames))
	if err != nil {
		return nil, "", localbox.CertKept, fmt.Errorf("make a self-signed certificate in %s: %w", dir, err)
	}
	if change != localbox.CertKept {
		logger.Printf("%s", newCertLine(cert, change == localbox.CertReplaced))
	}
	tc, err := localbox.LoadTLS(cert, key)
	return tc, cert, change, err
}

// newCertLine says that a self-signed certificate was made: the first,
// or one replacing an older one, which laptops may have pinned.
func newCertLine(cert string, replaced bool) string {
	if !replaced {
		return fmt.Sprintf("made a self-signed certificate %s", cert)
	}
	return fmt.Sprintf("made a new self-signed certificate %s in place of the old one; laptops that pinned the old one must pin this one (cocoonbox login --ca FILE, FILE a copy of it)", cert)
}

// localClient dials the local box at ep with a token it accepts: the one
// saved for ep, else the copy of the last one it issued to this CLI
// (STATE/cli-token, kept when a logout deletes the saved one), else a new
// one it issues, and checks that it answers. So start after a logout
// issues nothing new, and the device list does not grow.
func localClient(env Env, dir string, ep box.Endpoint) (*box.Client, error) {
	st, err := env.store()
	if err != nil {
		return nil, err
	}
	var cands []auth.Credential
	saved := 0 // how many of cands are saved for ep already
	if cred, err := st.Get(ep.URL); err == nil {
		cands, saved = append(cands, cred), 1
	}
	if b, err := os.ReadFile(cliTokenPath(dir)); err == nil {
		if tok := strings.TrimSpace(string(b)); auth.ValidToken(tok) && (len(cands) == 0 || cands[0].Token != tok) {
			cands = append(cands, auth.Credential{Token: tok, Source: auth.SourceLocalbox})
		}
	}
	for i, cred := range cands {
		c, err := answers(ep, cred.Token)
		if err == nil {
			if i >= saved {
				if err := st.Put(ep.URL, cred); err != nil {
					c.Close()
					return nil, err
				}
			}
			return c, nil
		}
		if !errors.Is(err, box.ErrUnauthenticated) {
			return nil, err
		}
	}
	tok, err := localbox.IssueToken(dir, "localbox", auth.ClientID)
	if err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(cliTokenPath(dir), []byte(tok+"\n"), 0o600); err != nil {
		return nil, err
	}
	if err := st.Put(ep.URL, auth.Credential{Token: tok, Source: auth.SourceLocalbox}); err != nil {
		return nil, err
	}
	return answers(ep, tok)
}

// cliTokenPath is where the local box keeps a copy of the token it issued
// to this CLI, 0600 in the 0700 state directory, whose reader could
// issue itself a token anyway.
func cliTokenPath(dir string) string { return filepath.Join(dir, "cli-token") }

// answers dials ep with tok and checks with one call that it is accepted.
func answers(ep box.Endpoint, tok string) (*box.Client, error) {
	c, err := box.Dial(ep, tok)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, err = c.List(ctx)
	cancel()
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// checkStateOwner is localbox.CheckStateOwner for a state directory that
// exists; one that does not is made by MkdirState, which checks it.
func checkStateOwner(dir string) error {
	if _, err := os.Lstat(dir); err != nil {
		return nil
	}
	return localbox.CheckStateOwner(dir)
}

func runLocalboxStop(env Env, s Streams) error {
	dir, err := localboxDir(env)
	if err != nil {
		return err
	}
	// Run by root, stop signals the pid localbox.json names: never one
	// from a state directory another user could have put in place.
	if err := checkStateOwner(dir); err != nil {
		return err
	}
	ri, ok := localbox.ReadRuntime(dir)
	if !ok {
		fmt.Fprintln(s.Err, "the local box is not running")
		return nil
	}
	if err := localbox.Stop(dir, ri); err != nil {
		return err
	}
	fmt.Fprintf(s.Err, "local box stopped (pid %d)\n", ri.PID)
	return nil
}

// running returns a client for the running local box, or an error that
// says how to start it.
func running(env Env) (*box.Client, error) {
	dir, err := localboxDir(env)
	if err != nil {
		return nil, err
	}
	ri, ok := localbox.ReadRuntime(dir)
	if !ok {
		return nil, errors.New("the local box is not running\nstart it with: cocoonbox localbox start")
	}
	ep, err := localEndpoint(env, ri)
	if err != nil {
		return nil, err
	}
	return localClient(env, dir, ep)
}

func runLocalboxStatus(env Env, s Streams, asJSON bool) error {
	c, err := running(env)
	certErr, _ := errors.AsType[*box.CertError](err)
	dir, _ := localboxDir(env)
	if err != nil && certErr == nil {
		if asJSON {
			writeJSON(s.Out, map[string]any{"running": false, "state_dir": dir})
		}
		return err
	}
	if c != nil {
		defer c.Close()
	}
	ri, _ := localbox.ReadRuntime(dir)
	if asJSON {
		return localboxStatusJSON(s, c, dir, ri, certErr)
	}
	fmt.Fprintf(s.Out, "running at %s (pid %d), state in %s\n", ri.Endpoint, ri.PID, dir)
	if ri.Fingerprint != "" {
		fmt.Fprintf(s.Out, "TLS certificate SHA-256 fingerprint %s\n", ri.Fingerprint)
	}
	if ri.RunAs != "" {
		fmt.Fprintln(s.Out, runAsLine(ri))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var boxes []box.Box
	if certErr == nil {
		boxes, err = c.List(ctx)
		certErr, _ = errors.AsType[*box.CertError](err)
		if err != nil && certErr == nil {
			return err
		}
	}
	if certErr != nil {
		// It runs; this computer only does not trust it.
		fmt.Fprintf(s.Err, "cocoonbox: its boxes are not listed: %v\n", certErr)
		return nil
	}
	for _, b := range boxes {
		fmt.Fprintf(s.Out, "box %s: %s\n", b.Name, b.State)
	}
	return nil
}

// localboxStatusJSON is status --json: one object, its boxes those of
// one List (none when this computer does not trust the certificate,
// which stderr says).
func localboxStatusJSON(s Streams, c *box.Client, dir string, ri localbox.Runtime, certErr *box.CertError) error {
	boxes := []map[string]any{}
	if certErr == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		bs, err := c.List(ctx)
		if certErr, _ = errors.AsType[*box.CertError](err); err != nil && certErr == nil {
			return err
		}
		for _, b := range bs {
			boxes = append(boxes, boxObject(b))
		}
	}
	if certErr != nil {
		fmt.Fprintf(s.Err, "cocoonbox: its boxes are not listed: %v\n", certErr)
	}
	return writeJSON(s.Out, map[string]any{
		"running": true, "endpoint": ri.Endpoint, "pid": ri.PID, "state_dir": dir,
		"fingerprint": ri.Fingerprint, "run_as": ri.RunAs, "boxes": boxes,
	})
}
