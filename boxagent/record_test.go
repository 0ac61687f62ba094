package boxagent

import (
	"os"
	"path/filepath"
	"testing"
)

// What runs in the box can write over the box agent's files: a
// session.json or an index.json that does not decode blocked every verb
// of the box (records failed), and the repo's own end, for good. Now a
// record that does not decode is a stopped session of the copy
// index.json names, numbering on from its inbox and outbox, and an
// index.json that does not decode is made again from the records.
func TestBrokenRecordAndIndex(t *testing.T) {
	dir := t.TempDir()
	cfg := &Config{Home: filepath.Join(dir, "home"), Workspace: filepath.Join(dir, "ws"), Shell: "/bin/sh", Environ: os.Environ(), RunDir: filepath.Join(dir, "run")}
	const good, bad = "0123456789abcdef", "fedcba9876543210"
	if err := cfg.writeRecord(&record{Repo: good, Name: "app", Dir: cfg.copyDir("app"), CLI: "claude", Status: StatusIdle}); err != nil {
		t.Fatal(err)
	}
	if err := cfg.updateShared(func(idx map[string]string) { idx[good], idx[bad] = "app", "lib" }); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(cfg.repoDir(bad), 0o700)
	if err := os.WriteFile(cfg.recordPath(bad), []byte("{garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg.outboxPath(bad), []byte(`{"seq":1}`+"\n"+`{"seq":7}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	recs, err := cfg.records()
	if err != nil || len(recs) != 2 {
		t.Fatalf("records: %d, %v; want both, the broken one as stopped", len(recs), err)
	}
	r, err := cfg.readRecord(bad)
	if err != nil || r == nil {
		t.Fatalf("readRecord of the broken one: %v, %v", r, err)
	}
	if r.Name != "lib" || r.Dir != cfg.copyDir("lib") || !r.Started || r.Status != StatusStopped || r.OutboxSeq != 7 || r.Fault == nil {
		t.Errorf("the broken record stands for %+v; want copy lib, started and stopped, outbox seq 7, a fault", r)
	}

	if err := os.WriteFile(filepath.Join(cfg.OffloadDir(), "index.json"), []byte("[1,"), 0o600); err != nil {
		t.Fatal(err)
	}
	idx, err := cfg.readIndex()
	if err != nil || idx[good] != "app" {
		t.Errorf("readIndex of a broken index.json: %v, %v; want it made again from the records", idx, err)
	}
	if err := cfg.updateShared(nil); err != nil {
		t.Errorf("updateShared with a broken index.json: %v", err)
	}
}
