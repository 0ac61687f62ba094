package cli_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
	// The box's paths are the guest's.
	setup := p.Setup
	p.Setup = func(e *testscript.Env) error {
		err := setup(e)
		e.Setenv("BOX_WORKSPACE", "/workspace")
		e.Setenv("BOX_HOME", "/home/user")
		return err
	}
	p.Cmds["imagebump"] = func(ts *testscript.TestScript, neg bool, args []string) {
		ts.Check(bumpImage(eng))
	}
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
	testscript.Run(t, p)
	// The scripts of testdata/script that hold no host path of the process
	// engine run against the container box too.
	t.Run("common", func(t *testing.T) {
		p.Dir = ""
		p.Files = nil
		for _, n := range engineCommon {
			p.Files = append(p.Files, "testdata/script/"+n+".txtar")
		}
		testscript.Run(t, p)
	})
}

// engineCommon are the scripts of testdata/script that run on both
// engines; the others read or write the box's files through the host
// paths of the process engine ($BOX_WORKSPACE from outside the box, or
// the state directory's boxes/), which a container box does not have.
var engineCommon = []string{
	"git_push", "git_big", "git_tls", "share_persist", "git_shallow_partial", "git_submodule", "git_protocol", "git_wake",
	"rsh_wake", "rsh_epipe", "rsh_concurrent", "rsh_stdin_refused", "rsh_auth", "ssh_git", "ssh_options",
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
			out = append(out, "network "+n.ID)
		}
	}
	return out, nil
}

// purgeUnder removes from engine eng what every local box whose state
// directory is under dir made: containers first, then volumes and
// networks.
func purgeUnder(eng, dir string) error {
	objs, err := engineObjects(eng, func(l map[string]string) bool {
		return strings.HasPrefix(l["org.cocoonbox.state"], dir+string(filepath.Separator))
	})
	if err != nil || len(objs) == 0 {
		return err
	}
	cli, err := engineClient(eng)
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx := context.Background()
	var errs []error
	for _, kind := range []string{"container", "volume", "network"} {
		for _, o := range objs {
			k, id, _ := strings.Cut(o, " ")
			if k != kind {
				continue
			}
			switch k {
			case "container":
				_, err = cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true})
			case "volume":
				_, err = cli.VolumeRemove(ctx, id, client.VolumeRemoveOptions{Force: true})
			case "network":
				_, err = cli.NetworkRemove(ctx, id, client.NetworkRemoveOptions{})
			}
			errs = append(errs, err)
		}
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
