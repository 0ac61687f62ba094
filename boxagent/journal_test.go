package boxagent

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A send that died in its index step (the Exec cut when the laptop went)
// left its journal, secrets arriving, a stage, and the locks and the
// temporary pack of its killed git in the copy: the next end (or begin,
// or send) undoes all of it, and the copy's git works again.
func TestResumeSend(t *testing.T) {
	dir := t.TempDir()
	c := &Config{Home: filepath.Join(dir, "home"), Workspace: filepath.Join(dir, "ws"), RunDir: filepath.Join(dir, "run"), Environ: os.Environ()}
	const k = "0123456789abcdef"
	copyDir := filepath.Join(c.Workspace, "app")
	gd := filepath.Join(copyDir, ".git")
	left := []string{
		filepath.Join(c.stageDir(k), "offload.bundle"),
		filepath.Join(c.SecretsDir(k)+".incoming", "aws"),
		filepath.Join(c.SecretsDir(k), "file-x"),
		filepath.Join(gd, "index.lock"),
		filepath.Join(gd, "refs", "heads", "main.lock"),
		filepath.Join(gd, "objects", "pack", "tmp_pack_abc"),
	}
	for _, p := range left {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.writeRecord(&record{Repo: k, Name: "app", Dir: copyDir, CLI: "claude", OffloadID: "id1", Status: StatusStopped, Step: StepIndex, Secrets: []string{"aws"}}); err != nil {
		t.Fatal(err)
	}

	// A send that still runs holds send.lock: end waits for it, and a
	// send that never lets go is refused, with nothing undone.
	unlock, err := c.sendLock(k, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.sendLock(k, 100*time.Millisecond); err == nil || asError(err).Code != "refused" {
		t.Fatalf("a second send.lock: %v, want refused", err)
	}
	for _, p := range left {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s went while a send held the lock: %v", p, err)
		}
	}
	unlock()

	if _, err := c.End(k); err != nil {
		t.Fatal(err)
	}
	for _, p := range left {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is still there (%v)", p, err)
		}
	}
	r, err := c.readRecord(k)
	if err != nil || r == nil {
		t.Fatal(r, err)
	}
	if r.Step != "" || r.OffloadID != "" || len(r.Secrets) != 0 {
		t.Errorf("record after end: step %q, offload %q, secrets %q; want all empty", r.Step, r.OffloadID, r.Secrets)
	}
	if r.copyState() != CopyMirror {
		t.Errorf("copy %s, want mirror", r.copyState())
	}
}

// A send whose session started is the inbox's: resumeSend only clears the
// step, and leaves the secrets the session uses.
func TestResumeSendStarted(t *testing.T) {
	dir := t.TempDir()
	c := &Config{Home: filepath.Join(dir, "home"), Workspace: filepath.Join(dir, "ws"), RunDir: filepath.Join(dir, "run")}
	const k = "0123456789abcdef"
	secret := filepath.Join(c.SecretsDir(k), "aws")
	if err := os.MkdirAll(filepath.Dir(secret), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secret, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.writeRecord(&record{Repo: k, Name: "app", Dir: dir, CLI: "claude", OffloadID: "id1", Started: true, Status: StatusWorking, Step: StepStart, Secrets: []string{"aws"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.resumeSend(k); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(secret); err != nil {
		t.Errorf("the running session's secret went: %v", err)
	}
	if r, _ := c.readRecord(k); r.Step != "" || len(r.Secrets) != 1 {
		t.Errorf("record: step %q, secrets %q; want no step, the secret kept", r.Step, r.Secrets)
	}
}
