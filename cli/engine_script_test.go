package cli_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/cocoonbox/cocoonbox/localbox"
)

// TestEngineScripts runs the scripts of testdata/engine against a local
// box on the container engine COCOONBOX_TEST_ENGINE names (docker or
// podman; .ci/run sets it and starts the engine). With it set, an engine
// that does not answer, or no box image, fails the test: it never
// passes by skipping. Unset, the test says how to run it and skips.
func TestEngineScripts(t *testing.T) {
	eng := os.Getenv("COCOONBOX_TEST_ENGINE")
	if eng == "" {
		t.Skip("COCOONBOX_TEST_ENGINE is unset: set it to docker or podman (as .ci/run does) to run the container engine's scripts")
	}
	if os.Geteuid() != 0 {
		t.Fatal("COCOONBOX_TEST_ENGINE needs root: the box image is built with debootstrap")
	}
	// With the package's other parallel tests, after its sequential ones:
	// by then the image .ci/run builds beside the tests is most likely
	// there, and EnsureImage does not wait.
	t.Parallel()
	// The box image, built when the engine has none; a build .ci/run
	// started beside the tests is waited for.
	if _, err := localbox.EnsureImage(context.Background(), localbox.ImageOptions{Engine: eng, CacheDir: imageCache, Log: testLog{t}}); err != nil {
		t.Fatal(err)
	}
	p := paramsWith(t, "testdata/engine", func(e *testscript.Env, srv *localbox.Server) error {
		srv.Engine = localbox.EngineSettings{Engine: eng, Limits: localbox.Limits{MemoryBytes: 256 << 20, Pids: 256}}
		srv.User = ""
		e.Values["srv"] = srv
		e.Setenv("ENGINE", eng)
		// Nothing of the script's boxes is left in the engine after it,
		// nor of the local boxes it started under $WORK itself.
		e.Defer(func() {
			if err := purgeUnder(eng, e.WorkDir); err != nil {
				t.Errorf("purge the boxes under %s: %v", e.WorkDir, err)
			}
		})
		return nil
	})
	// The box's own commands see the guest's paths; the script reaches
	// the same files from here in the box's volumes and, while its
	// container runs, its /run/cocoonbox through /proc.
	setup := p.Setup
	p.Setup = func(e *testscript.Env) error {
		if err := setup(e); err != nil {
			return err
		}
		d, err := containerBoxDirs(eng, e.Getenv("BOX_STATE"), localbox.DefaultBox)
		if err != nil {
			return err
		}
		e.Setenv("BOX_WORKSPACE", d.workspace)
		e.Setenv("BOX_HOME", d.home)
		e.Setenv("BOX_RUN", d.run)
		e.Setenv("GUEST_WORKSPACE", "/workspace")
		e.Setenv("GUEST_HOME", "/home/user")
		e.Setenv("GUEST_RUN", "/run/cocoonbox")
		return nil
	}
	cond := p.Condition
	p.Condition = func(c string) (bool, error) {
		if c == "container" {
			return true, nil
		}
		return cond(c)
	}
	p.Cmds["boxdir"] = func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 3 {
			ts.Fatalf("usage: boxdir BOX home|workspace|run VAR")
		}
		d, err := containerBoxDirs(eng, ts.Getenv("BOX_STATE"), args[0])
		ts.Check(err)
		switch args[1] {
		case "home":
			ts.Setenv(args[2], d.home)
		case "workspace":
			ts.Setenv(args[2], d.workspace)
		case "run":
			ts.Setenv(args[2], d.run)
		default:
			ts.Fatalf("usage: boxdir BOX home|workspace|run VAR")
		}
	}
	// What a script puts in a box from outside is the guest user's.
	p.Cmds["boxown"] = func(ts *testscript.TestScript, neg bool, args []string) {
		chownAll(ts, neg, args, guestUID, guestUID)
	}
	p.Cmds["imagebump"] = func(ts *testscript.TestScript, neg bool, args []string) {
		ts.Check(bumpImage(eng))
	}
	p.Cmds["httpserve"] = httpserve
	p.Cmds["upstreamproxy"] = upstreamproxy
	p.Cmds["hostlisten"] = hostlisten
	p.Cmds["nftable"] = nftable
	p.Cmds["nftdelete"] = nftdelete
	p.Cmds["enginels"] = func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) == 0 {
			ts.Fatalf("usage: enginels KEY=VALUE...")
		}
		names, err := engineObjects(eng, func(l map[string]string) bool {
			for _, a := range args {
				k, v, _ := strings.Cut(a, "=")
				if l[k] != v {
					return false
				}
			}
			return true
		})
		ts.Check(err)
		for _, n := range names {
			fmt.Fprintln(ts.Stdout(), n)
		}
	}
	// The scripts mostly wait (on the engine, on timeouts they provoke),
	// so they run more at once than go test's -parallel, which the
	// package's other tests share.
	pool := newScriptPool(t, engineParallel())
	testscript.RunT(pool, p)
	// The scripts of testdata/script of the areas engineAreas names run
	// against the container box too.
	t.Run("common", func(t *testing.T) {
		files, err := engineCommonScripts("testdata/script")
		if err != nil {
			t.Fatal(err)
		}
		p.Dir = ""
		p.Files = files
		common := pool.under(t)
		testscript.RunT(common, p)
		common.wait()
	})
	pool.wait()
}

// engineParallel is how many engine scripts run at once:
// COCOONBOX_TEST_ENGINE_PARALLEL, or 6.
func engineParallel() int {
	if n, err := strconv.Atoi(os.Getenv("COCOONBOX_TEST_ENGINE_PARALLEL")); err == nil && n > 0 {
		return n
	}
	return 6
}

// scriptPool is a testscript.T whose scripts run at once, at most cap(sem)
// of them, each as a subtest of t started from a goroutine of its own
// (Run may be called so) rather than as a parallel subtest, which would
// wait for one of go test's -parallel slots.
type scriptPool struct {
	*testing.T
	sem chan struct{}
	wg  *sync.WaitGroup
}

func newScriptPool(t *testing.T, n int) scriptPool {
	return scriptPool{T: t, sem: make(chan struct{}, n), wg: new(sync.WaitGroup)}
}

// under is a pool of t's subtests that shares p's limit.
func (p scriptPool) under(t *testing.T) scriptPool {
	return scriptPool{T: t, sem: p.sem, wg: new(sync.WaitGroup)}
}

// wait returns when every script Run started has ended.
func (p scriptPool) wait() { p.wg.Wait() }

// Parallel does nothing: the pool already runs the script beside others.
func (p scriptPool) Parallel() {}

// Verbose is go test's -v.
func (p scriptPool) Verbose() bool { return testing.Verbose() }

// Run runs f as subtest name once the pool has room.
func (p scriptPool) Run(name string, f func(testscript.T)) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.sem <- struct{}{}
		defer func() { <-p.sem }()
		p.T.Run(name, func(t *testing.T) {
			f(scriptPool{T: t, sem: p.sem, wg: new(sync.WaitGroup)})
		})
	}()
}

// engineAreas are the name prefixes of the scripts of testdata/script
// that run on the container engine as well as on the process engine:
// every script of rsh, cocoonbox-ssh (ssh_), git-remote-cocoonbox (git_),
// sshconfig, offload and back, accounts, one of the resumable sessions'
// (the holder in a container; the others test the client, the same on
// either engine, and cost CI minutes), and the one of sharing that keeps
// a share across a restart. A script among them that holds to the
// process engine's shape for a reason says so with [container] or
// [!container] on the lines concerned.
var engineAreas = []string{"rsh_", "ssh_", "git_", "sshconfig_", "offload_", "back_", "localbox_accounts", "share_persist", "session_cut_tls"}

// engineLaptopOnly are the scripts of engineAreas that never reach a box
// (they test the laptop's checks, files and help, or the server's
// refusal of a token before any box is named), so that a container box
// would add its start and nothing else: some 75 s of the engine's pool
// in a run at load 25.
var engineLaptopOnly = []string{
	"offload_help", "offload_handover", "offload_path_newline", "offload_secrets_entries",
	"sshconfig_markers", "sshconfig_remove_created", "rsh_auth",
}

// engineCommonScripts are the scripts of dir that engineAreas names, but
// engineLaptopOnly.
func engineCommonScripts(dir string) ([]string, error) {
	all, err := filepath.Glob(filepath.Join(dir, "*.txtar"))
	if err != nil {
		return nil, err
	}
	var files []string
	for _, f := range all {
		name := strings.TrimSuffix(filepath.Base(f), ".txtar")
		if slices.ContainsFunc(engineAreas, func(a string) bool { return strings.HasPrefix(name, a) }) && !slices.Contains(engineLaptopOnly, name) {
			files = append(files, f)
		}
	}
	return files, nil
}

// guestUID is the box image's user `user`, uid and gid 1000 as on the
// contract's guest, whose files a box's volumes hold.
const guestUID = 1000

// boxDirs are where a test reaches a box's directories from the host.
type boxDirs struct{ home, workspace, run string }

// containerBoxDirs finds the directories of the owner's box name of the
// local box at state on engine eng: its home and workspace volumes'
// mount points, and its /run/cocoonbox through the /proc root of its
// container's first process (a path that moves when the container
// restarts, and is missing while it is stopped).
func containerBoxDirs(eng, state, name string) (boxDirs, error) {
	cli, err := engineClient(eng)
	if err != nil {
		return boxDirs{}, err
	}
	defer cli.Close()
	ctx := context.Background()
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", "org.cocoonbox.state="+state)})
	if err != nil {
		return boxDirs{}, err
	}
	for _, c := range cs.Items {
		if c.Labels["org.cocoonbox.account"] != "" {
			continue
		}
		res, err := cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
		if err != nil {
			return boxDirs{}, err
		}
		in := res.Container
		if in.Config == nil || !slices.Contains(in.Config.Env, "COCOONBOX_BOX="+name) {
			continue
		}
		var d boxDirs
		for _, m := range in.Mounts {
			switch m.Destination {
			case "/home/user":
				d.home = m.Source
			case "/workspace":
				d.workspace = m.Source
			}
		}
		if d.home == "" || d.workspace == "" {
			return boxDirs{}, fmt.Errorf("container %s of box %s has no home or workspace volume", c.ID, name)
		}
		pid := 0
		if in.State != nil && in.State.Running {
			pid = in.State.Pid
		}
		d.run = fmt.Sprintf("/proc/%d/root/run/cocoonbox", pid)
		return d, nil
	}
	return boxDirs{}, fmt.Errorf("no container of box %s under %s", name, state)
}

// imageCache is where the box image's debootstrap tree is kept between
// runs, as `localbox image build` keeps it for root.
const imageCache = "/var/cache/cocoonbox"

// testLog is a writer to the test's log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Logf("%s", p)
	return len(p), nil
}

// engineClient is the API client of engine eng (docker or podman) at its
// usual rootful socket.
func engineClient(eng string) (*client.Client, error) {
	host := "unix:///var/run/docker.sock"
	if eng == localbox.EnginePodman {
		host = "unix:///run/podman/podman.sock"
	}
	return client.New(client.WithHost(host), client.WithAPIVersionNegotiation())
}

// engineObjects names the containers, volumes and networks a local box
// made in engine eng (they carry its state label) whose labels match:
// "container NAME", "volume NAME", "network NAME".
func engineObjects(eng string, match func(labels map[string]string) bool) ([]string, error) {
	cli, err := engineClient(eng)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	ctx := context.Background()
	f := client.Filters{}.Add("label", "org.cocoonbox.state")
	var out []string
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, err
	}
	for _, c := range cs.Items {
		if match(c.Labels) {
			out = append(out, "container "+c.ID)
		}
	}
	vs, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: f})
	if err != nil {
		return nil, err
	}
	for _, v := range vs.Items {
		if match(v.Labels) {
			out = append(out, "volume "+v.Name)
		}
	}
	ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		return nil, err
	}
	for _, n := range ns.Items {
		if match(n.Labels) {
			// An internal network (egress rules set) has no route out.
			if n.Internal {
				out = append(out, "network "+n.ID+" internal")
			} else {
				out = append(out, "network "+n.ID)
			}
		}
	}
	return out, nil
}

// purgeUnder removes from engine eng what every local box whose state
// directory is under dir made (localbox.PurgeEngine: containers,
// volumes, networks, and its firewall table).
func purgeUnder(eng, dir string) error {
	states := map[string]bool{}
	_, err := engineObjects(eng, func(l map[string]string) bool {
		if st := l["org.cocoonbox.state"]; strings.HasPrefix(st, dir+string(filepath.Separator)) {
			states[st] = true
		}
		return false
	})
	if err != nil {
		return err
	}
	var errs []error
	for st := range states {
		errs = append(errs, localbox.PurgeEngine(context.Background(), localbox.EngineSettings{Engine: eng}, st))
	}
	return errors.Join(errs...)
}

// bumpImage makes a new box image as `localbox image build` would tag
// it (cocoonbox-box:TIME and :latest) in a second: the latest's files
// committed again under a label of the time. .ci/run's own build checks
// the build; the scripts need only an image newer than their boxes'.
func bumpImage(eng string) error {
	cli, err := engineClient(eng)
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx := context.Background()
	old, err := cli.ImageInspect(ctx, localbox.ImageRepo+":latest")
	if err != nil {
		return err
	}
	tag := ""
	for tag == "" || slices.Contains(old.RepoTags, tag) {
		if tag != "" {
			time.Sleep(time.Second)
		}
		tag = localbox.ImageRepo + ":" + time.Now().UTC().Format("20060102-150405")
	}
	c, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{Config: &container.Config{Image: localbox.ImageRepo + ":latest"}})
	if err != nil {
		return err
	}
	defer cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true})
	if _, err := cli.ContainerCommit(ctx, c.ID, client.ContainerCommitOptions{Reference: tag, Changes: []string{"LABEL org.cocoonbox.test-bump=" + tag}}); err != nil {
		return err
	}
	_, err = cli.ImageTag(ctx, client.ImageTagOptions{Source: tag, Target: localbox.ImageRepo + ":latest"})
	return err
}
