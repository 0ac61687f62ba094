//go:build unix

package boxagent

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A session.json that what runs in the box made a FIFO, or a link to
// /dev/zero, neither blocks the box agent's verbs nor reads without end:
// it is a record that does not decode (a stopped session of the copy
// index.json names), and every other repo's record still reads.
func TestRecordNotRegular(t *testing.T) {
	dir := t.TempDir()
	cfg := &Config{Home: filepath.Join(dir, "home"), Workspace: filepath.Join(dir, "ws"), Shell: "/bin/sh", Environ: os.Environ(), RunDir: filepath.Join(dir, "run")}
	const good, fifo, zero = "0123456789abcdef", "fedcba9876543210", "00000000ffffffff"
	if err := cfg.writeRecord(&record{Repo: good, Name: "app", Dir: cfg.copyDir("app"), CLI: "claude", Status: StatusIdle}); err != nil {
		t.Fatal(err)
	}
	if err := cfg.updateShared(func(idx map[string]string) { idx[good], idx[fifo], idx[zero] = "app", "lib", "z" }); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(cfg.repoDir(fifo), 0o700)
	os.MkdirAll(cfg.repoDir(zero), 0o700)
	if err := syscall.Mkfifo(cfg.recordPath(fifo), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", cfg.recordPath(zero)); err != nil {
		t.Fatal(err)
	}
	recs, err := cfg.records()
	if err != nil || len(recs) != 3 {
		t.Fatalf("records: %d, %v; want all three, the planted ones as stopped", len(recs), err)
	}
	for _, k := range []string{fifo, zero} {
		r, err := cfg.readRecord(k)
		if err != nil || r == nil || r.Status != StatusStopped || r.Fault == nil {
			t.Errorf("readRecord of %s: %+v, %v; want a stopped session with a fault", k, r, err)
		}
	}
}
