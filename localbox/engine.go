package localbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/cocoonbox/cocoonbox/internal/jsonfile"
	controlv1 "github.com/cocoonbox/cocoonbox/proto/cocoonbox/control/v1"
)

// The engines a local box runs its boxes on (docs/self-hosting.md).
const (
	// EngineProcess runs boxes as directories and commands as host
	// processes: every platform, no isolation between a box and the host.
	EngineProcess = "process"
	// EngineDocker runs each box as a container of the box image.
	EngineDocker = "docker"
	// EnginePodman is EngineDocker on podman's Docker-compatible socket.
	EnginePodman = "podman"
)

// engine is what a box needs from the runtime under it. The server keeps
// a box's record (box.json) and its state; the engine makes, starts,
// stops and removes what runs it, and starts its commands.
type engine interface {
	// name is one of the Engine constants.
	name() string
	// create makes box b's machine and starts it: its home and
	// workspace, and what runs its commands.
	create(ctx context.Context, b *box) error
	// start wakes box b's machine; a machine that is gone is made again
	// around the box's home and workspace.
	start(ctx context.Context, b *box) error
	// stop puts box b's machine to sleep; its home and workspace stay.
	stop(ctx context.Context, b *box) error
	// remove ends what runs in box b and removes its machine, home and
	// workspace for good.
	remove(ctx context.Context, b *box) error
	// exec starts a command in box b as its user: pipes, or a PTY.
	exec(b *box, start *controlv1.Start) (running, error)
	// measure adds up the sizes of the regular files in box b's home and
	// workspace: the bytes a save of it holds.
	measure(ctx context.Context, b *box) (int64, error)
	// status is "running", "stopped" or "missing".
	status(ctx context.Context, b *box) (string, error)
	// upgrade moves box b to the latest image (imageView), keeping its
	// home and workspace; its Execs and inbox have ended. A running box
	// runs again on the new image; a hibernated one stays asleep.
	upgrade(ctx context.Context, b *box) error
	// boot brings box b, as the server found it at its start or as an
	// account's boxes are opened, to its recorded state.
	boot(ctx context.Context, b *box) error
	// prepare finishes what boot began for boxes bs, all at once: the
	// process engine prepares their homes (a box user may hold that up
	// once, not once a box).
	prepare(bs []*box)
	// shutdown ends what the engine runs: the server is going away.
	shutdown()
}

// running is one command an engine started: its output streams, its
// stdin, signals and resizes, and how it ended.
type running interface {
	// streams are the command's outputs, read until EOF.
	streams() []output
	write(p []byte)
	closeStdin()
	closeStdout()
	// signal delivers a signal by SSH name (INT, TERM, ...).
	signal(name string)
	resize(rows, cols uint32)
	// kill ends the command: SIGHUP, then SIGKILL after killDelay.
	kill()
	// wait waits for the command's end and says how it ended.
	wait() *controlv1.Exit
	// close frees what the command held once it ended.
	close()
}

// EngineSettings is what the local box remembers of its engine, in
// DIR/engine.json: what `localbox start --engine` chose, and the box
// limits the owner set. Zero limits are the defaults.
type EngineSettings struct {
	// Engine is EngineProcess, EngineDocker or EnginePodman; "" is
	// EngineProcess.
	Engine string `json:"engine,omitempty"`
	// Host is the engine's API address (unix:///var/run/docker.sock);
	// "" is the engine's usual socket.
	Host string `json:"host,omitempty"`
	// Limits are the limits of each box, unless an account sets its own.
	Limits Limits `json:"limits,omitzero"`
	// Egress is where a container engine's boxes reach the network
	// (egress.go); zero is everywhere.
	Egress Egress `json:"egress,omitzero"`
}

// Limits bound what one box of a container engine may use.
type Limits struct {
	// MemoryBytes is the box's memory (and memory plus swap); 0 is
	// DefaultLimits' value.
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	// NanoCPUs is the box's CPU time in billionths of a CPU.
	NanoCPUs int64 `json:"nano_cpus,omitempty"`
	// Pids is the number of processes and threads the box may hold.
	Pids int64 `json:"pids,omitempty"`
}

// DefaultLimits are each box's limits where the owner set none.
var DefaultLimits = Limits{MemoryBytes: 2 << 30, NanoCPUs: 2e9, Pids: 1024}

// or is l with DefaultLimits where l has zeros.
func (l Limits) or(d Limits) Limits {
	if l.MemoryBytes == 0 {
		l.MemoryBytes = d.MemoryBytes
	}
	if l.NanoCPUs == 0 {
		l.NanoCPUs = d.NanoCPUs
	}
	if l.Pids == 0 {
		l.Pids = d.Pids
	}
	return l
}

// EngineSettingsPath is where the local box whose state is in dir keeps
// its EngineSettings.
func EngineSettingsPath(dir string) string { return filepath.Join(dir, "engine.json") }

// ReadEngineSettings reads dir's EngineSettings; none is the process
// engine's.
func ReadEngineSettings(dir string) (EngineSettings, error) {
	var e EngineSettings
	_, err := jsonfile.Read(EngineSettingsPath(dir), &e)
	if e.Engine == "" {
		e.Engine = EngineProcess
	}
	return e, err
}

// SaveEngineSettings records e for the local box whose state is in dir.
func SaveEngineSettings(dir string, e EngineSettings) error {
	if err := CheckEngine(e.Engine); err != nil {
		return err
	}
	return jsonfile.Write(EngineSettingsPath(dir), e, 0o600)
}

// CheckEngine refuses a name that is no engine.
func CheckEngine(name string) error {
	switch name {
	case EngineProcess, EngineDocker, EnginePodman, "":
		return nil
	}
	return fmt.Errorf("no engine %q: use docker, podman or process", name)
}

// CheckEngineAnswers says, in one line with the next step, when set's
// container engine does not answer; the process engine always does.
func CheckEngineAnswers(set EngineSettings) error {
	if set.Engine == "" || set.Engine == EngineProcess {
		return nil
	}
	cli, err := dialEngine(context.Background(), set.Engine, set.Host)
	if err != nil {
		return err
	}
	return cli.Close()
}

// engineHost is the API address of engine name when host is "": docker's
// DOCKER_HOST or its usual socket, podman's rootful or rootless socket.
func engineHost(name, host string) string {
	if host != "" {
		return host
	}
	switch name {
	case EnginePodman:
		if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" && os.Getuid() != 0 {
			return "unix://" + filepath.Join(x, "podman", "podman.sock")
		}
		return "unix:///run/podman/podman.sock"
	default:
		if h := os.Getenv("DOCKER_HOST"); h != "" {
			return h
		}
		return "unix:///var/run/docker.sock"
	}
}

// dialEngine opens the API client of a container engine at host (""
// for its usual socket) and checks that it answers; the API version is
// negotiated (docker 20.10 speaks 1.41).
func dialEngine(ctx context.Context, name string, host ...string) (*client.Client, error) {
	h := ""
	if len(host) > 0 {
		h = host[0]
	}
	h = engineHost(name, h)
	cli, err := client.New(client.WithHost(h), client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("engine %s at %s: %w", name, h, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		cli.Close()
		return nil, engineDown(name, h, err)
	}
	return cli, nil
}

// engineDown is the error for engine name not answering at host (err),
// with the next step for why: a socket this user may not open, an
// engine not installed (no socket, and no program of its name on PATH),
// or one that does not run.
func engineDown(name, host string, err error) error {
	if path, ok := strings.CutPrefix(host, "unix://"); ok {
		c, derr := net.DialTimeout("unix", path, 2*time.Second)
		switch {
		case derr == nil:
			c.Close()
		case errors.Is(derr, fs.ErrPermission):
			fix := "join the docker group (sudo usermod -aG docker $USER, then log in again), or use rootless podman (--engine podman)"
			if name == EnginePodman {
				fix = "use rootless podman (systemctl --user start podman.socket)"
			}
			return fmt.Errorf("engine %s refuses this user at %s (permission denied): run as root, or %s; or run the local box with --engine process", name, host, fix)
		case errors.Is(derr, fs.ErrNotExist) && !installed(name):
			return fmt.Errorf("engine %s is not installed: nothing at %s, and no %s on PATH; install it (docs/cocoonbox.md \"Container engines\"), or run the local box with --engine process", name, host, name)
		}
	}
	return fmt.Errorf("engine %s does not answer at %s: %w; start it (%s), or run the local box with --engine process", name, host, err, startCommand(name))
}

// installed reports whether a program of engine name (or its daemon) is
// on PATH.
func installed(name string) bool {
	for _, p := range []string{name, name + "d"} {
		if _, err := exec.LookPath(p); err == nil {
			return true
		}
	}
	return false
}

// startCommand is the command that starts engine name's API socket for
// this user.
func startCommand(name string) string {
	switch {
	case name != EnginePodman:
		return "systemctl start " + name
	case os.Getuid() != 0:
		return "systemctl --user start podman.socket"
	}
	return "systemctl start podman.socket"
}

// processEngine runs boxes as directories and their commands as host
// processes (as the box user when the server is root): today's local box.
type processEngine struct{ s *Server }

func (processEngine) name() string { return EngineProcess }

func (e processEngine) create(_ context.Context, b *box) error {
	if err := e.s.chownBox(b); err != nil {
		return fmt.Errorf("give box %s to its user: %w", b.Name, err)
	}
	e.s.prepareHome(b)
	return nil
}

func (processEngine) start(context.Context, *box) error { return nil }
func (processEngine) stop(context.Context, *box) error  { return nil }

func (e processEngine) remove(_ context.Context, b *box) error {
	e.s.endBox(b)
	b.idle(killDelay + time.Second)
	return removeBoxDir(b.dir, e.s.userOf(b))
}

func (e processEngine) exec(b *box, start *controlv1.Start) (running, error) {
	p, err := e.s.startProcess(b, start)
	if err != nil {
		return nil, err
	}
	pid := p.cmd.Process.Pid
	e.s.recordProc(b, pid)
	return &hostProcess{process: p, forget: func() { e.s.forgetProc(pid) }}, nil
}

// upgrade ends what the box's commands left running (tmux, processes out
// of their groups), records LatestImage and prepares the home again.
func (e processEngine) upgrade(_ context.Context, b *box) error {
	e.s.killTmux(b)
	e.s.sweepWhere(killDelay, b.ID)
	e.s.endBoxMarked(b, killDelay)
	b.idle(killDelay + time.Second)
	b.mu.Lock()
	b.Image = LatestImage
	b.active = time.Now()
	err := b.saveLocked()
	b.mu.Unlock()
	if err != nil {
		return err
	}
	e.s.prepareHome(b)
	return nil
}

func (processEngine) measure(_ context.Context, b *box) (int64, error) { return b.measure() }

func (processEngine) status(context.Context, *box) (string, error) { return "running", nil }

// boot gives the box's directories to its user; prepare prepares the
// homes after.
func (e processEngine) boot(_ context.Context, b *box) error {
	if err := e.s.chownBox(b); err != nil {
		return fmt.Errorf("give box %s to its user: %w", b.Name, err)
	}
	return nil
}

func (e processEngine) prepare(bs []*box) { e.s.prepareHomes(bs) }

// shutdown has nothing to do: powerOff ends the boxes' processes.
func (processEngine) shutdown() {}

// openEngine is the engine of s.Engine. A container engine's boxes read
// their images from it (imageView).
func (s *Server) openEngine() (engine, error) {
	if s.Engine.Engine == "" || s.Engine.Engine == EngineProcess {
		return processEngine{s}, nil
	}
	if err := CheckEngine(s.Engine.Engine); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := newContainerEngine(ctx, s, s.Engine)
	if err != nil {
		return nil, err
	}
	s.reg.images.mu.Lock()
	s.reg.images.container = true
	s.reg.images.mu.Unlock()
	c.latestImage(ctx)
	return c, nil
}

// refreshImages reads a container engine's latest box image again, so
// that status, list and upgrade see an image `localbox image build` made
// since; the process engine's never changes. An engine that does not
// answer leaves the last one read.
func (s *Server) refreshImages(ctx context.Context) {
	if c, ok := s.eng.(*containerEngine); ok {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		c.latestImage(ctx)
	}
}

// hostProcess is a process as a running: the pid the server recorded for
// stop's sweep is forgotten once it is reaped.
type hostProcess struct {
	*process
	forget func()
}

func (h *hostProcess) streams() []output { return h.outputs }

func (h *hostProcess) wait() *controlv1.Exit {
	werr := h.process.wait()
	h.forget()
	return exitOf(h.cmd.ProcessState, werr)
}
