package localbox_test

import (
	"os"
	"os/user"
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
