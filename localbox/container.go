package localbox

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cocoonbox/cocoonbox/internal/proc"
	controlv1 "github.com/cocoonbox/cocoonbox/proto/cocoonbox/control/v1"
)

// The box's paths inside its container, as on the contract's guest.
const (
	guestHome      = "/home/user"
	guestWorkspace = "/workspace"
	guestUser      = "user"
	guestAgent     = "/usr/local/bin/cocoonbox-agent"
	// guestRun is the box's /run for our files (the inbox socket, tmux's
	// sockets): a tmpfs of the box user.
	guestRun = "/run/cocoonbox"
)

// The labels of what a container engine makes for a box: the local box's
// state directory, the box's id, and its account (none for the owner's).
const (
	stateLabel      = "org.cocoonbox.state"
	boxLabel        = "org.cocoonbox.box"
	accountLabelKey = "org.cocoonbox.account"
)

// containerEngine runs each box as a container of the box image on
// docker or podman, through the engine's API.
type containerEngine struct {
	s      *Server
	engine string
	cli    *client.Client
	limits Limits
	// inboxAt is when startInbox last looked at each box's inbox and
	// found none to hold, inboxHeld the inboxes it holds, by box id
	// (container_inbox.go; inboxMu guards both).
	inboxMu   sync.Mutex
	inboxAt   map[string]time.Time
	inboxHeld map[string]*heldInbox
	// prefix names this local box's containers, volumes and networks:
	// two local boxes on one engine never share one.
	prefix string
	// fast are the boxes' exec servers (container_exec.go).
	fast execHosts
	// egress is the boxes' HTTP(S) proxy (egress.go); rules its owner's
	// rules.
	egress *egressProxy
	rules  Egress
	// fw fences the boxes off the host's own services
	// (firewall_linux.go).
	fw *hostFirewall
}

// newContainerEngine dials the engine of set for the local box in dir.
func newContainerEngine(ctx context.Context, s *Server, set EngineSettings) (*containerEngine, error) {
	cli, err := dialEngine(ctx, set.Engine, set.Host)
	if err != nil {
		return nil, err
	}
	h := sha256.Sum256([]byte(s.Dir))
	port := 20000 + int(binary.BigEndian.Uint16(h[4:6]))%10000
	prefix := enginePrefix(s.Dir)
	e := &containerEngine{s: s, engine: set.Engine, cli: cli, limits: set.Limits.or(DefaultLimits),
		prefix: prefix, rules: set.Egress,
		egress: newEgressProxy(set.Egress, port, os.Getenv, s.logf),
		fw:     newHostFirewall(prefix, set.Engine == EnginePodman)}
	if err := e.fenceHost(ctx); err != nil {
		cli.Close()
		return nil, err
	}
	if err := e.fw.watch(s.logf); err != nil {
		s.logf("the firewall is not made again if something deletes it: %v", err)
	}
	return e, nil
}

// enginePrefix names the containers, volumes and networks of the local
// box whose state directory is dir, and its firewall's table.
func enginePrefix(dir string) string {
	h := sha256.Sum256([]byte(dir))
	return "cocoonbox-" + hex.EncodeToString(h[:4])
}

func (e *containerEngine) name() string { return e.engine }

// names are box b's container (and network) and its two volumes.
func (e *containerEngine) names(b *box) (ctr, home, work string) {
	ctr = e.prefix + "-" + strings.ReplaceAll(b.ID, "_", "-")
	return ctr, ctr + "-home", ctr + "-workspace"
}

// latestImage is the time tag ImageRepo:latest stands for, which it
// records as the boxes' latest image (imageView).
func (e *containerEngine) latestImage(ctx context.Context) (string, error) {
	img, err := e.readLatest(ctx)
	if err == nil || cerrdefs.IsNotFound(err) {
		v := e.s.reg.images
		v.mu.Lock()
		v.latest = img
		v.mu.Unlock()
	}
	if cerrdefs.IsNotFound(err) {
		return "", fmt.Errorf("no box image in %s: build it with `cocoonbox localbox image build --engine %s`", e.engine, e.engine)
	}
	return img, err
}

func (e *containerEngine) readLatest(ctx context.Context) (string, error) {
	return latestTag(ctx, e.cli)
}

// latestTag is the time tag ImageRepo:latest stands for in cli's engine.
func latestTag(ctx context.Context, cli *client.Client) (string, error) {
	res, err := cli.ImageInspect(ctx, ImageRepo+":latest")
	if err != nil {
		return "", err
	}
	for _, t := range res.RepoTags {
		if strings.HasPrefix(t, ImageRepo+":") && t != ImageRepo+":latest" {
			return t, nil
		}
	}
	return ImageRepo + ":latest", nil
}

// create makes box b's container on the image it records (createBox
// chose it), or the latest.
func (e *containerEngine) create(ctx context.Context, b *box) error {
	img := b.engineImage()
	if img == "" {
		var err error
		if img, err = e.latestImage(ctx); err != nil {
			return err
		}
	}
	b.mu.Lock()
	b.EngineImage = img
	err := b.saveLocked()
	b.mu.Unlock()
	if err != nil {
		return err
	}
	if err := e.make(ctx, b, img); err != nil {
		return err
	}
	if err := e.start(ctx, b); err != nil {
		return err
	}
	b.mu.Lock()
	b.fresh = false
	b.mu.Unlock()
	return nil
}

// make creates box b's network, volumes (kept when they are there) and
// container on image img.
func (e *containerEngine) make(ctx context.Context, b *box, img string) error {
	ctr, home, work := e.names(b)
	labels := map[string]string{stateLabel: e.s.Dir, boxLabel: b.ID}
	if b.account != "" {
		labels[accountLabelKey] = b.account
	}
	// A network of its own: the box's localhost and ports are its own,
	// and no other box is on its bridge.
	// Docker 20.10 makes a second network of one name: create only when
	// inspect finds none.
	if _, err := e.cli.NetworkInspect(ctx, ctr, client.NetworkInspectOptions{}); cerrdefs.IsNotFound(err) {
		if err := e.createNetwork(ctx, b, ctr, labels); err != nil {
			return err
		}
	} else if err != nil {
		return fmt.Errorf("network of box %s: %w", b.Name, err)
	}
	for _, v := range []string{home, work} {
		if _, err := e.cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: v, Labels: labels}); err != nil {
			return fmt.Errorf("volume %s of box %s: %w", v, b.Name, err)
		}
	}
	mounts := []mount.Mount{
		// A new volume starts as the image's directory (the skeleton
		// files of /home/user, /workspace owned by user).
		{Type: mount.TypeVolume, Source: home, Target: guestHome},
		{Type: mount.TypeVolume, Source: work, Target: guestWorkspace},
	}
	if agent := e.s.agentPath(); agent != "" {
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: agent, Target: guestAgent, ReadOnly: true})
		// The lean session binary beside it, which every resumable
		// command starts (docs/cocoonbox-agent.md "session").
		if sess := filepath.Join(filepath.Dir(agent), "cocoonbox-session"); regularFile(sess) {
			mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: sess, Target: path.Join(path.Dir(guestAgent), "cocoonbox-session"), ReadOnly: true})
		}
	}
	em, err := execMount(b)
	if err != nil {
		return fmt.Errorf("exec directory of box %s: %w", b.Name, err)
	}
	mounts = append(mounts, em)
	tm, err := e.trustMount(b)
	if err != nil {
		return fmt.Errorf("trust directory of box %s: %w", b.Name, err)
	}
	mounts = append(mounts, tm)
	res := resources(e.limitsOf(b))
	initOn := true
	stop := 2
	_, err = e.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: ctr,
		Config: &container.Config{
			Image:       img,
			Hostname:    strings.ReplaceAll(b.Name, "_", "-"),
			Labels:      labels,
			Cmd:         []string{"/bin/sleep", "infinity"},
			StopTimeout: &stop,
			Env:         []string{"COCOONBOX_BOX=" + b.Name},
		},
		HostConfig: &container.HostConfig{
			NetworkMode: container.NetworkMode(ctr),
			Mounts:      mounts,
			Tmpfs:       map[string]string{guestRun: e.runTmpfs(), "/tmp": "mode=1777"},
			Init:        &initOn,
			// Box root is container root: docker's default capabilities
			// less those a box has no use for, seccomp's default
			// profile; sudo works inside, nothing reaches the host.
			CapDrop:   []string{"NET_RAW", "MKNOD", "AUDIT_WRITE", "SETFCAP", "SYS_CHROOT"},
			Resources: res,
		},
	})
	if err != nil && !cerrdefs.IsConflict(err) && !nameInUse(err) {
		return fmt.Errorf("container of box %s: %w", b.Name, err)
	}
	return nil
}

// nameInUse reports whether err is podman's for a container name that
// is taken, which docker answers as a conflict (409) and podman 4.3's
// compatible API as an internal error (500).
func nameInUse(err error) bool {
	return strings.Contains(err.Error(), "is already in use")
}

// runTmpfs are the options of the box's guestRun tmpfs: the box user's,
// 0700. Podman 4.3 refuses uid= and gid= there ("unknown mount option"):
// its tmpfs is made root's, and ownRun gives it to the user at each
// start.
func (e *containerEngine) runTmpfs() string {
	if e.engine == EnginePodman {
		return "mode=0700"
	}
	return "mode=0700,uid=1000,gid=1000"
}

// ownRun gives box b's guestRun, in its container ctr that has just
// started, to the box user, 0700 (podman 4.3 made it 0755 whatever the
// mode asked), as box root.
func (e *containerEngine) ownRun(ctx context.Context, b *box, ctr string) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cr, err := e.cli.ExecCreate(ctx, ctr, client.ExecCreateOptions{User: "0:0", AttachStdout: true, AttachStderr: true,
		Cmd: []string{"/bin/sh", "-c", `chown 1000:1000 "$1" && chmod 0700 "$1"`, "sh", guestRun}})
	if err == nil {
		var at client.ExecAttachResult
		if at, err = e.cli.ExecAttach(ctx, cr.ID, client.ExecAttachOptions{}); err == nil {
			io.Copy(io.Discard, at.Reader)
			at.Close()
		}
	}
	if err != nil {
		e.s.logf("box %s: give %s to the box user: %v", b.Name, guestRun, err)
	}
}

// limitsOf are box b's limits: its account's own, and the local box's
// where the account sets none.
func (e *containerEngine) limitsOf(b *box) Limits {
	if b.account != "" {
		return e.s.accts.limits(b.account).or(e.limits)
	}
	return e.limits
}

// resources are a container's resources under limits l: memory (swap
// none beyond it), CPUs and processes.
func resources(l Limits) container.Resources {
	pids := l.Pids
	return container.Resources{Memory: l.MemoryBytes, MemorySwap: l.MemoryBytes, NanoCPUs: l.NanoCPUs, PidsLimit: &pids}
}

// updateLimits gives the container of box b, running or not, the limits
// limitsOf has for it now: an account's that its owner changed since
// the container was made.
func (e *containerEngine) updateLimits(ctx context.Context, b *box) error {
	ctr, _, _ := e.names(b)
	r := resources(e.limitsOf(b))
	_, err := e.cli.ContainerUpdate(ctx, ctr, client.ContainerUpdateOptions{Resources: &r})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("limits of box %s: %w", b.Name, err)
	}
	return nil
}

func (e *containerEngine) start(ctx context.Context, b *box) error {
	ctr, _, _ := e.names(b)
	if b.account != "" {
		// Limits its owner set while the box slept, or the server was down.
		if err := e.updateLimits(ctx, b); err != nil {
			e.s.logf("%v", err)
		}
	}
	if err := e.networkEgress(ctx, b, ctr); err != nil {
		return err
	}
	if err := e.fw.add(e.bridge(b)); err != nil {
		return fmt.Errorf("start box %s: fence it off this machine: %w", b.Name, err)
	}
	_, err := e.cli.ContainerStart(ctx, ctr, client.ContainerStartOptions{})
	if cerrdefs.IsNotFound(err) {
		img := b.engineImage()
		if img == "" {
			if img, err = e.latestImage(ctx); err != nil {
				return err
			}
		}
		if err := e.make(ctx, b, img); err != nil {
			return err
		}
		_, err = e.cli.ContainerStart(ctx, ctr, client.ContainerStartOptions{})
	}
	if err != nil {
		return fmt.Errorf("start box %s: %w", b.Name, err)
	}
	if e.engine == EnginePodman {
		e.ownRun(ctx, b, ctr)
	}
	e.copyTrust(b)
	e.listenEgress(ctx, b, ctr)
	e.startExecServer(ctx, b, ctr)
	return nil
}

func (e *containerEngine) stop(ctx context.Context, b *box) error {
	e.forgetInbox(b)
	ctr, _, _ := e.names(b)
	t := 2
	_, err := e.cli.ContainerStop(ctx, ctr, client.ContainerStopOptions{Timeout: &t})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("stop box %s: %w", b.Name, err)
	}
	return nil
}

func (e *containerEngine) remove(ctx context.Context, b *box) error {
	e.forgetInbox(b)
	e.dropExecHost(b)
	e.egress.drop(b.ID)
	e.fenceProxyPorts(b)
	ctr, home, work := e.names(b)
	if _, err := e.cli.ContainerRemove(ctx, ctr, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("remove the container of box %s: %w", b.Name, err)
	}
	for _, v := range []string{home, work} {
		if _, err := e.cli.VolumeRemove(ctx, v, client.VolumeRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("remove volume %s of box %s: %w", v, b.Name, err)
		}
	}
	if _, err := e.cli.NetworkRemove(ctx, ctr, client.NetworkRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("remove the network of box %s: %w", b.Name, err)
	}
	if err := e.fw.remove(e.bridge(b)); err != nil {
		e.s.logf("box %s: %v", b.Name, err)
	}
	// The directory holds the local box's own record of the box only.
	return os.RemoveAll(b.dir)
}

func (e *containerEngine) boot(ctx context.Context, b *box) error {
	b.mu.Lock()
	fresh, hib := b.fresh || b.EngineImage == "", b.Hibernated
	b.mu.Unlock()
	if fresh {
		return e.create(ctx, b)
	}
	if hib {
		return nil
	}
	return e.start(ctx, b)
}

// shutdown stops every box's container, as the process engine ends
// every box's processes: nothing of a box runs past the server.
func (e *containerEngine) shutdown() {
	var wg sync.WaitGroup
	var failed atomic.Bool
	for _, b := range e.s.reg.all() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := e.stop(ctx, b); err != nil {
				e.s.logf("%v", err)
				failed.Store(true)
			}
		}()
	}
	wg.Wait()
	e.closeExecHosts()
	e.egress.close()
	// The fence goes with the boxes; a box that may still run keeps it
	// until the next start replaces it, or a purge.
	if failed.Load() {
		e.s.logf("a box did not stop: its firewall table %s stays", e.prefix)
	} else if err := e.fw.close(); err != nil {
		e.s.logf("%v", err)
	}
}

// upgrade recreates box b's container on the latest image, keeping its
// volumes, and records the image. What ran in the old container ends
// with it.
func (e *containerEngine) upgrade(ctx context.Context, b *box) error {
	img, err := e.latestImage(ctx)
	if err != nil {
		return err
	}
	b.idle(killDelay + time.Second)
	e.forgetInbox(b)
	ctr, _, _ := e.names(b)
	if _, err := e.cli.ContainerRemove(ctx, ctr, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("remove the container of box %s: %w", b.Name, err)
	}
	b.mu.Lock()
	b.EngineImage = img
	b.active = time.Now()
	err = b.saveLocked()
	hib := b.Hibernated
	b.mu.Unlock()
	if err != nil {
		return err
	}
	if err := e.make(ctx, b, img); err != nil {
		return err
	}
	if !hib {
		return e.start(ctx, b)
	}
	return nil
}

// prepare has nothing to do: a new home volume starts as the image's
// /home/user.
func (e *containerEngine) prepare([]*box) {}

// measureScript prints the sum of the sizes of the regular files under
// its arguments, on their own file systems, as box.measure does.
const measureScript = `find "$@" -xdev -type f -printf '%s\n' 2>/dev/null | awk '{n += $1} END {print n + 0}'`

// measure asks the box, as its user, for the sizes of what is in its
// volumes.
func (e *containerEngine) measure(ctx context.Context, b *box) (int64, error) {
	ctr, _, _ := e.names(b)
	out, err := e.run(ctx, ctr, nil, measureScript, guestHome, guestWorkspace)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
}

func (e *containerEngine) status(ctx context.Context, b *box) (string, error) {
	ctr, _, _ := e.names(b)
	res, err := e.cli.ContainerInspect(ctx, ctr, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return "missing", nil
	}
	if err != nil {
		return "", err
	}
	if res.Container.State != nil && res.Container.State.Running {
		return "running", nil
	}
	return "stopped", nil
}

// environ is a command's environment in the box: the guest's login
// environment, the machine's trust settings (trustEnv), plus what the
// client asked for.
func (e *containerEngine) environ(b *box, start *controlv1.Start) []string {
	env := map[string]string{
		"HOME": guestHome, "USER": guestUser, "LOGNAME": guestUser, "SHELL": "/bin/bash",
		"PATH":              guestHome + "/.local/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"LANG":              "C.UTF-8",
		"COCOONBOX_BOX":     b.Name,
		"COCOONBOX_WORKDIR": guestWorkspace,
		"COCOONBOX_RUN_DIR": guestRun,
		"TMUX_TMPDIR":       guestRun,
	}
	trustEnv(b, env)
	e.egress.proxyEnv(b.ID, env)
	if t := start.GetTty(); t != nil && t.GetTerm() != "" {
		env["TERM"] = t.GetTerm()
	}
	for k, v := range start.GetEnv() {
		if k != "" && !strings.ContainsAny(k, "=\x00") && !strings.Contains(v, "\x00") {
			env[k] = v
		}
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// execScript wraps every command: it records the command's pid in the
// box (for signals, which the engine's exec API lacks) and runs it as a
// login shell does. It runs under bash: the image's sh is dash, which has
// no exec -a (a login shell ended in "exec: -a: not found", exit 127).
// The engine starts each exec's process as the leader of a session of its
// own (runc and crun call setsid), with pipes too, so its pid is its
// process group's, as under the process engine.
// $1 is the pid file, $2 "-" for a login shell or the command, $3 and $4
// a PTY's rows and columns: set before the command starts, since API
// 1.41 (docker 20.10) sets no size at an exec's create.
const execScript = `echo $$ >"$1" 2>/dev/null
[ -n "$3" ] && stty rows "$3" cols "$4" 2>/dev/null
if [ "$2" = - ]; then exec -a -bash /bin/bash; fi
exec /bin/bash -c "$2"`

func (e *containerEngine) exec(b *box, start *controlv1.Start) (running, error) {
	ctx := context.Background()
	ctr, _, _ := e.names(b)
	dir := start.GetDir()
	switch {
	case dir == "":
		dir = guestWorkspace
	case !path.IsAbs(dir):
		dir = path.Join(guestWorkspace, dir)
	}
	if x, err := e.fastExec(b, start, dir); err != errAPIPath {
		return x, err
	}
	t := start.GetTty()
	cmd := start.GetCommand()
	if cmd == "" {
		cmd = "-"
	}
	id := make([]byte, 8)
	rand.Read(id)
	pidFile := guestRun + "/exec-" + hex.EncodeToString(id) + ".pid"
	argv := []string{"/bin/bash", "-c", execScript, "bash", pidFile, cmd}
	if t != nil && t.GetRows() > 0 && t.GetCols() > 0 {
		argv = append(argv, fmt.Sprint(t.GetRows()), fmt.Sprint(t.GetCols()))
	}
	if t != nil {
		e.installTerminfo(b, t)
	}
	opts := client.ExecCreateOptions{
		User: "1000:1000", TTY: t != nil, AttachStdin: true, AttachStdout: true, AttachStderr: true,
		Env: e.environ(b, start), WorkingDir: dir, Cmd: argv,
	}
	if t != nil && t.GetRows() > 0 && t.GetCols() > 0 {
		opts.ConsoleSize = client.ConsoleSize{Height: uint(t.GetRows()), Width: uint(t.GetCols())}
	}
	cr, err := e.cli.ExecCreate(ctx, ctr, opts)
	if err != nil {
		if cerrdefs.IsConflict(err) || cerrdefs.IsNotFound(err) {
			return nil, notRunning(b)
		}
		return nil, status.Errorf(codes.Internal, "exec in box %s: %v", b.Name, err)
	}
	at, err := e.cli.ExecAttach(ctx, cr.ID, client.ExecAttachOptions{TTY: t != nil, ConsoleSize: opts.ConsoleSize})
	if err != nil {
		return nil, status.Errorf(codes.Internal, "exec in box %s: %v", b.Name, err)
	}
	x := &containerExec{e: e, b: b, ctr: ctr, id: cr.ID, hj: at.HijackedResponse, tty: t != nil, pidFile: pidFile}
	if x.tty {
		x.outs = []output{{r: io.NopCloser(at.Reader)}}
	} else {
		or, ow := io.Pipe()
		er, ew := io.Pipe()
		x.outs = []output{{r: or}, {r: er, stderr: true}}
		go func() {
			_, err := stdcopy.StdCopy(&dropWriter{w: ow}, &dropWriter{w: ew}, at.Reader)
			ow.CloseWithError(err)
			ew.CloseWithError(err)
		}()
	}
	return x, nil
}

// dropWriter writes to w until a write fails (its reader closed), then
// drops the rest: the other stream of the same connection goes on.
type dropWriter struct {
	w    *io.PipeWriter
	dead bool
}

func (d *dropWriter) Write(p []byte) (int, error) {
	if !d.dead {
		if _, err := d.w.Write(p); err != nil {
			d.dead = true
		}
	}
	return len(p), nil
}

// containerExec is a command started by the engine's exec API.
type containerExec struct {
	e       *containerEngine
	b       *box
	ctr, id string
	hj      client.HijackedResponse
	tty     bool
	outs    []output
	pidFile string

	mu      sync.Mutex
	closed  bool
	pid     string // the command's pid in the box, once read
	ended   bool
	killing bool
}

func (x *containerExec) streams() []output { return x.outs }

func (x *containerExec) write(p []byte) {
	x.mu.Lock()
	closed := x.closed
	x.mu.Unlock()
	if !closed {
		x.hj.Conn.Write(p)
	}
}

// closeStdin ends the command's stdin; on a terminal it only stops
// writing, as sshd does: the engine closes a terminal's output when its
// stdin ends (docker 20.10's attach), which lost what the command wrote
// after (`rsh -tt main 'echo hi' </dev/null` printed nothing). The
// attach ends with the command.
func (x *containerExec) closeStdin() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.closed {
		x.closed = true
		if !x.tty {
			x.hj.CloseWrite()
		}
	}
}

func (x *containerExec) closeStdout() {
	if !x.tty {
		x.outs[0].r.Close()
	}
}

// signal sends a signal to the command's process group in the box, from
// a second exec as the box user: the engine's API has none for an exec.
// The pid is the one the command wrote in the box's run directory; until
// the command has ended, no other process can hold it.
func (x *containerExec) signal(name string) {
	sig := proc.SignalNum(name)
	if sig == 0 {
		return
	}
	x.signalNum(sig)
}

func (x *containerExec) signalNum(sig syscall.Signal) {
	x.mu.Lock()
	ended := x.ended
	x.mu.Unlock()
	if ended {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	script := fmt.Sprintf(`p=$(cat %s) && kill -%d -"$p" 2>/dev/null || kill -%d "$p"`, x.pidFile, int(sig), int(sig))
	x.e.run(ctx, x.ctr, nil, script)
}

func (x *containerExec) resize(rows, cols uint32) {
	if x.tty && rows > 0 && cols > 0 {
		x.e.cli.ExecResize(context.Background(), x.id, client.ExecResizeOptions{Height: uint(rows), Width: uint(cols)})
	}
}

func (x *containerExec) kill() {
	x.mu.Lock()
	if x.killing {
		x.mu.Unlock()
		return
	}
	x.killing = true
	x.mu.Unlock()
	go func() {
		x.signalNum(syscall.SIGHUP)
		time.Sleep(killDelay)
		x.signalNum(syscall.SIGKILL)
		x.hj.Close()
	}()
}

// wait waits for the exec to end (its streams have ended) and reads its
// exit code; a code above 128 is a signal's, as the shell reports it.
func (x *containerExec) wait() *controlv1.Exit {
	ctx := context.Background()
	defer func() {
		x.mu.Lock()
		x.ended = true
		x.mu.Unlock()
		x.e.run(ctx, x.ctr, nil, "rm -f "+x.pidFile)
	}()
	for i := 0; ; i++ {
		res, err := x.e.cli.ExecInspect(ctx, x.id, client.ExecInspectOptions{})
		if err != nil {
			return &controlv1.Exit{Code: 255, Error: err.Error()}
		}
		if !res.Running {
			return &controlv1.Exit{Code: int32(res.ExitCode)}
		}
		time.Sleep(time.Duration(min(i+1, 50)) * time.Millisecond)
	}
}

func (x *containerExec) close() { x.hj.Close() }

// run runs a shell script in container ctr as the box user, stdin from
// in, and returns its output.
func (e *containerEngine) run(ctx context.Context, ctr string, in []byte, script string, args ...string) ([]byte, error) {
	return e.runEnv(ctx, ctr, []string{"HOME=" + guestHome}, in, script, args...)
}

// agentOutput runs cocoonbox-agent with args in box b as its user, in
// the environment of its commands, and returns its output.
func (e *containerEngine) agentOutput(ctx context.Context, b *box, args ...string) ([]byte, error) {
	ctr, _, _ := e.names(b)
	return e.runEnv(ctx, ctr, e.environ(b, &controlv1.Start{}), nil, `exec cocoonbox-agent "$@"`, args...)
}

// runEnv is run with the environment env.
func (e *containerEngine) runEnv(ctx context.Context, ctr string, env []string, in []byte, script string, args ...string) ([]byte, error) {
	cr, err := e.cli.ExecCreate(ctx, ctr, client.ExecCreateOptions{
		User: "1000:1000", AttachStdin: in != nil, AttachStdout: true, AttachStderr: true,
		Env: env,
		Cmd: append([]string{"/bin/sh", "-c", script, "sh"}, args...),
	})
	if err != nil {
		return nil, err
	}
	at, err := e.cli.ExecAttach(ctx, cr.ID, client.ExecAttachOptions{})
	if err != nil {
		return nil, err
	}
	defer at.Close()
	if in != nil {
		at.Conn.Write(in)
		at.CloseWrite()
	}
	var out, errb strings.Builder
	stdcopy.StdCopy(&out, &errb, at.Reader)
	res, err := e.cli.ExecInspect(ctx, cr.ID, client.ExecInspectOptions{})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("exit %d: %s", res.ExitCode, strings.TrimSpace(errb.String()))
	}
	return []byte(out.String()), err
}

// installTerminfo puts the client's terminfo entry in the box user's
// ~/.terminfo, as the process engine does.
func (e *containerEngine) installTerminfo(b *box, t *controlv1.Tty) {
	term, data := t.GetTerm(), t.GetTerminfo()
	if len(data) == 0 || len(data) > maxTerminfo || !termRE().MatchString(term) {
		return
	}
	ctr, _, _ := e.names(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.run(ctx, ctr, data, terminfoScript, term, term[:1], fmt.Sprintf("%x", term[0])); err != nil {
		e.s.logf("box %s: terminfo entry %s: %v", b.Name, term, err)
	}
}

// PurgeEngine removes from the engine of set every container, volume and
// network a local box with state directory dir made: what its boxes were,
// data included; and its firewall table from the host. For a state
// directory removed by hand, and tests.
func PurgeEngine(ctx context.Context, set EngineSettings, dir string) error {
	return purgeState(ctx, set, dir)
}

// purgeState removes what the local box with state directory dir made
// in the engine of set, and its firewall table.
func purgeState(ctx context.Context, set EngineSettings, dir string) error {
	if err := purgeEngine(ctx, set, stateLabel+"="+dir); err != nil {
		return err
	}
	return removeFirewall(enginePrefix(dir))
}

// purgeEngine removes from the engine of set every container, volume and
// network that carries all of labels (KEY=VALUE). One that went
// meanwhile (the server removed it) is no error.
func purgeEngine(ctx context.Context, set EngineSettings, labels ...string) error {
	cli, err := dialEngine(ctx, set.Engine, set.Host)
	if err != nil {
		return err
	}
	defer cli.Close()
	f := client.Filters{}.Add("label", labels...)
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range cs.Items {
		_, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true})
		errs = append(errs, ignoreNotFound(err))
	}
	vs, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: f})
	if err != nil {
		return err
	}
	for _, v := range vs.Items {
		_, err := cli.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true})
		errs = append(errs, ignoreNotFound(err))
	}
	ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		return err
	}
	for _, n := range ns.Items {
		_, err := cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{})
		errs = append(errs, ignoreNotFound(err))
	}
	return errors.Join(errs...)
}

// ignoreNotFound is err, or nil when it says there is no such object.
func ignoreNotFound(err error) error {
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	return err
}

// regularFile reports whether p is a regular file (following links, as
// a bind mount's source does).
func regularFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}
