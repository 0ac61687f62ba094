package localbox_test

import (
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/localbox"
)

// An account added while the local box's engine is a container engine
// gets no Unix user (none made, none claimed), and a local box started
// again on the process engine refuses its calls in one line with the way
// back, rather than running its commands as some host user.
func TestEngineAccountOnProcessEngine(t *testing.T) {
	dir, claims, prefix := rootState(t)
	if err := localbox.MkdirState(dir); err != nil {
		t.Fatal(err)
	}
	if err := localbox.SaveEngineSettings(dir, localbox.EngineSettings{Engine: localbox.EngineDocker}); err != nil {
		t.Fatal(err)
	}
	if _, err := localbox.AddAccount(dir, "bob", localbox.AddAccountOptions{UnixUser: "nobody", ClaimsDir: claims}); err == nil || !strings.Contains(err.Error(), "leave --unix-user out") {
		t.Errorf("AddAccount --unix-user on docker: %v, want the refusal", err)
	}
	bob, tok := addAccount(t, dir, claims, prefix, "bob")
	if bob.Account.Engine != localbox.EngineDocker || bob.Account.UnixUser != "" || bob.Account.UID != 0 || bob.Account.Created {
		t.Fatalf("bob's account on docker = %+v, want the engine and no Unix user", bob.Account)
	}
	if _, err := user.Lookup(prefix + "bob"); err == nil {
		t.Errorf("the Unix user %sbob was made", prefix)
	}
	if ents, _ := os.ReadDir(claims); len(ents) > 0 {
		t.Errorf("claims made for bob: %v", ents)
	}

	if err := localbox.SaveEngineSettings(dir, localbox.EngineSettings{Engine: localbox.EngineProcess}); err != nil {
		t.Fatal(err)
	}
	base, _ := serveDir(t, dir)
	_, _, _, err := execIn(dial(t, base, tok), "main", "id -un")
	if err == nil || !strings.Contains(err.Error(), "account bob has no Unix user: it was added for the docker engine") || !strings.Contains(err.Error(), "--engine docker") {
		t.Errorf("bob's Exec on the process engine: %v, want the refusal naming --engine docker", err)
	}
}

// account remove of an account on a container engine removes its
// directory (DIR/accounts/NAME, root's records) with links planted in it,
// and at it, and nothing through them: a file link, a directory link
// where a box's directory and its exec directories are, and the account's
// directory itself a link.
func TestRemoveEngineAccountFollowsNoLink(t *testing.T) {
	dir, claims, prefix := rootState(t)
	if err := localbox.MkdirState(dir); err != nil {
		t.Fatal(err)
	}
	if err := localbox.SaveEngineSettings(dir, localbox.EngineSettings{Engine: localbox.EngineDocker}); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(filepath.Dir(dir), "elsewhere")
	keep := []string{"f", "d/g", "boxes/x/h"}
	for _, k := range keep {
		if err := os.MkdirAll(filepath.Join(target, filepath.Dir(k)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(target, k), []byte("keep"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"bob", "carol"} {
		addAccount(t, dir, claims, prefix, name)
	}
	bob := filepath.Join(dir, "accounts", "bob")
	main := filepath.Join(bob, "boxes", "main")
	if err := os.MkdirAll(main, 0o711); err != nil {
		t.Fatal(err)
	}
	for link, to := range map[string]string{
		filepath.Join(main, "exec"):        filepath.Join(target, "d"),
		filepath.Join(main, "record.json"): filepath.Join(target, "f"),
		filepath.Join(bob, "boxes", "x"):   filepath.Join(target, "boxes", "x"),
		filepath.Join(bob, "up"):           target,
	} {
		if err := os.Symlink(to, link); err != nil {
			t.Fatal(err)
		}
	}
	// carol's directory is a link to one with a box of its own.
	carol := filepath.Join(dir, "accounts", "carol")
	if err := os.RemoveAll(carol); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, carol); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"bob", "carol"} {
		if _, err := localbox.RemoveAccount(dir, name, localbox.RemoveAccountOptions{ClaimsDir: claims}); err != nil {
			t.Errorf("remove %s: %v", name, err)
		}
	}
	for _, k := range keep {
		if b, err := os.ReadFile(filepath.Join(target, k)); err != nil || string(b) != "keep" {
			t.Errorf("the links' target lost %s: %q %v", k, b, err)
		}
	}
	for _, d := range []string{bob, carol} {
		if _, err := os.Lstat(d); err == nil {
			t.Errorf("%s is left", d)
		}
	}
}
