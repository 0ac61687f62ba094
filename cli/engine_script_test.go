package cli_test

import (
	"context"
	"os"
	"testing"

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
		// Nothing of the script's boxes is left in the engine after it.
		e.Defer(func() {
			if err := localbox.PurgeEngine(context.Background(), srv.Engine, srv.Dir); err != nil {
				t.Errorf("purge the boxes of %s: %v", srv.Dir, err)
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
	p.Cmds["imagebuild"] = func(ts *testscript.TestScript, neg bool, args []string) {
		_, err := localbox.BuildImage(context.Background(), localbox.ImageOptions{Engine: eng, CacheDir: imageCache})
		ts.Check(err)
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
