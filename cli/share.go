package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/internal/version"
	"github.com/cocoonbox/cocoonbox/share"
)

// Connection sharing (docs/architecture.md "Connection sharing"): the
// settings come from COCOONBOX_CONTROL_PERSIST; the master is the hidden
// command `cocoonbox control-master`, started by the first call.

// controlPersist reads COCOONBOX_CONTROL_PERSIST: how long a master stays
// with no call open, or 0 when sharing is off.
func (e Env) controlPersist() (time.Duration, error) {
	v := strings.TrimSpace(e.Getenv("COCOONBOX_CONTROL_PERSIST"))
	switch strings.ToLower(v) {
	case "":
		return share.DefaultPersist, nil
	case "0", "no", "off":
		return 0, nil
	}
	if n, err := strconv.Atoi(v); err == nil && n > 0 {
		return time.Duration(n) * time.Second, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= time.Second {
		return d, nil
	}
	return 0, fmt.Errorf("COCOONBOX_CONTROL_PERSIST=%q: want a time such as 10m or 600 (seconds, at least 1s), or no to turn connection sharing off", v)
}

// defaultMinRTT is COCOONBOX_CONTROL_MIN_RTT's default: a box on this
// machine or the LAN is dialed directly, one over the internet shared.
const defaultMinRTT = 2 * time.Millisecond

// controlMinRTT reads COCOONBOX_CONTROL_MIN_RTT: the shortest round trip
// of a master's link for which calls go through the master (share.Sharing).
func (e Env) controlMinRTT() (time.Duration, error) {
	v := strings.TrimSpace(e.Getenv("COCOONBOX_CONTROL_MIN_RTT"))
	if v == "" {
		return defaultMinRTT, nil
	}
	// ParseDuration takes a bare 0 too.
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return d, nil
	}
	return 0, fmt.Errorf("COCOONBOX_CONTROL_MIN_RTT=%q: want a round trip such as 2ms or 500us, or 0 to share every master's connection", v)
}

// controlDir is where the control sockets live: $XDG_RUNTIME_DIR/cocoonbox,
// else the state directory, else /tmp/cocoonbox-UID when those make a
// socket path too long.
func (e Env) controlDir() (string, error) {
	var dirs []string
	if d := e.Getenv("XDG_RUNTIME_DIR"); d != "" && filepath.IsAbs(d) {
		dirs = append(dirs, filepath.Join(d, "cocoonbox", "control"))
	}
	if d, err := e.stateDir(); err == nil {
		dirs = append(dirs, filepath.Join(d, "control"))
	}
	dirs = append(dirs, filepath.Join("/tmp", fmt.Sprintf("cocoonbox-%d", os.Getuid()), "control"))
	return share.FirstShortDir(dirs)
}

// sharing is the WithSharing option for ep, or nil when sharing is off.
func (e Env) sharing(ep box.Endpoint) ([]box.DialOption, error) {
	persist, err := e.controlPersist()
	if err != nil || persist == 0 || runtime.GOOS == "windows" || e.GOOS != "" {
		return nil, err
	}
	minRTT, err := e.controlMinRTT()
	if err != nil {
		return nil, err
	}
	dir, err := e.controlDir()
	if err != nil {
		return nil, nil
	}
	cfg, _ := e.configDir()
	// The version too: a master of another build may not speak this one's
	// check (share.CheckMethod).
	key := strings.Join([]string{cfg, e.Getenv("SSL_CERT_FILE"), e.Getenv("SSL_CERT_DIR"), e.Getenv("COCOONBOX_KEEPALIVE"), version.String()}, "\x00")
	start := func(url, caFile, sock string, lock *os.File) error {
		exe, err := cocoonboxExe()
		if err != nil {
			return err
		}
		argv := []string{"cocoonbox", "control-master", "--endpoint", url, "--socket", sock}
		if caFile != "" {
			argv = append(argv, "--ca", caFile)
		}
		var env []string
		for _, kv := range e.Environ {
			// The master holds no token: each call brings its own.
			if !strings.HasPrefix(kv, "COCOONBOX_TOKEN=") {
				env = append(env, kv)
			}
		}
		return share.Start(exe, argv, env, lock)
	}
	return []box.DialOption{box.WithSharing(share.Sharing{Dir: dir, Key: key, Start: start, MinRTT: minRTT, Log: e.Getenv("COCOONBOX_CONTROL_LOG")})}, nil
}

// cocoonboxExe finds the cocoonbox binary, which runs the master: this
// executable if it is that, else the one beside it, else on PATH.
func cocoonboxExe() (string, error) {
	exe, err := os.Executable()
	if err == nil {
		if b := strings.TrimSuffix(filepath.Base(exe), ".exe"); b == "cocoonbox" {
			return exe, nil
		}
		if c := filepath.Join(filepath.Dir(exe), "cocoonbox"); isExecutable(c) {
			return c, nil
		}
	}
	return exec.LookPath("cocoonbox")
}

// stopSharing ends the masters of ep (logout): their sockets go, and they
// with them.
func (e Env) stopSharing(ep box.Endpoint) {
	if dir, err := e.controlDir(); err == nil {
		share.Stop(dir, ep.URL)
	}
}

type controlMasterOptions struct {
	Endpoint, Socket, CA string
}

func newControlMaster(env Env, s Streams) *cobra.Command {
	var o controlMasterOptions
	c := &cobra.Command{
		Use:    "control-master",
		Short:  "Hold one connection to an endpoint for the calls that follow (started by them)",
		Hidden: true,
		Args:   usageArgs(cobra.NoArgs),
		RunE:   func(*cobra.Command, []string) error { return runControlMaster(env, o) },
	}
	c.Flags().StringVar(&o.Endpoint, "endpoint", "", "the endpoint URL")
	c.Flags().StringVar(&o.Socket, "socket", "", "the control socket to serve")
	c.Flags().StringVar(&o.CA, "ca", "", "the CA file the endpoint's certificate must chain to")
	return c
}

func runControlMaster(env Env, o controlMasterOptions) error {
	share.CloseInherited()
	lock := os.NewFile(share.LockFD, "lock")
	if lock == nil || o.Endpoint == "" || o.Socket == "" {
		return &UsageError{fmt.Errorf("control-master is started by the other commands, with its lock as descriptor %d", share.LockFD)}
	}
	ep, err := box.ParseEndpoint(o.Endpoint)
	if err != nil {
		return err
	}
	ep.CAFile = o.CA
	persist, err := env.controlPersist()
	if err != nil {
		return err
	}
	if persist == 0 {
		return nil
	}
	var opts []box.DialOption
	if v := env.Getenv("COCOONBOX_KEEPALIVE"); v != "" {
		t, timeout, err := parseKeepalive(v)
		if err != nil {
			return err
		}
		opts = append(opts, box.WithKeepalive(t, timeout))
	}
	dial := func(rtt time.Duration) (*share.Upstream, error) {
		return box.DialUpstream(ep, append(opts, box.WithPathRTT(rtt))...)
	}
	m := &share.Master{URL: ep.URL, Dial: dial, Socket: o.Socket, Lock: lock, Persist: persist, Log: env.Getenv("COCOONBOX_CONTROL_LOG")}
	return m.Serve()
}
