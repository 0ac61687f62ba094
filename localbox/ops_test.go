package localbox_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cocoonbox/cocoonbox/localbox"
)

// newServer serves a local box in a fresh directory (as the box user when
// run by root) on loopback TCP and returns its endpoint and a token.
func newServer(t *testing.T, configure func(*localbox.Server)) (srv *localbox.Server, base, tok string) {
	t.Helper()
	dir := t.TempDir()
	srv = &localbox.Server{Dir: dir, Logf: t.Logf}
	if os.Geteuid() == 0 {
		for _, d := range []string{filepath.Dir(dir), dir} {
			os.Chmod(d, 0o711)
		}
		srv.User = localbox.DefaultUser
	}
	if configure != nil {
		configure(srv)
	}
	lis, base, err := localbox.Listen(dir, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	run(t, srv, lis)
	tok, err = localbox.IssueToken(dir, "test", "cli")
	if err != nil {
		t.Fatal(err)
	}
	return srv, base, tok
}

// Status reads a box without waking it; create --image makes a box on an
// older label, which Status reports as upgradable and Upgrade moves to
// the latest, keeping the workspace; Save measures the box's files and
// records the time; Usage says what it cannot measure.
func TestBoxOperations(t *testing.T) {
	_, base, tok := newServer(t, nil)
	c := dial(t, base, tok)
	ctx := t.Context()

	old := localbox.Images[0]
	b, err := c.Create(ctx, "old", old)
	if err != nil || b.Image != old {
		t.Fatalf("Create on %s = %+v, %v", old, b, err)
	}
	if _, err := c.Create(ctx, "bad", "ubuntu"); err == nil {
		t.Fatal("Create on an image not offered: no error")
	}
	runIn(t, c, "old", "printf keep > kept")
	st, err := c.Status(ctx, "old")
	if err != nil || !st.UpgradeAvailable || st.LatestImage != localbox.LatestImage || st.State != "running" {
		t.Fatalf("Status = %+v, %v", st, err)
	}

	r, err := c.Save(ctx, "old", nil)
	if err != nil || r.Bytes < 4 || r.Box.LastSavedAtMS == 0 || r.OperationID == "" {
		t.Fatalf("Save = %+v, %v", r, err)
	}

	if _, err := c.Hibernate(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if st, err := c.Status(ctx, "old"); err != nil || st.State != "hibernated" {
			t.Fatalf("Status of a hibernated box = %+v, %v", st, err)
		}
	}
	// A hibernated box was saved when it slept: Save does not wake it.
	if r, err := c.Save(ctx, "old", nil); err != nil || r.OperationID != "" || r.Box.State != "hibernated" {
		t.Fatalf("Save of a hibernated box = %+v, %v", r, err)
	}

	r, err = c.Upgrade(ctx, "old", nil)
	if err != nil || r.Box.Image != localbox.LatestImage || r.Box.UpgradeAvailable || r.OperationID == "" || r.Box.State != "hibernated" {
		t.Fatalf("Upgrade = %+v, %v", r, err)
	}
	if r, err := c.Upgrade(ctx, "old", nil); err != nil || r.OperationID != "" {
		t.Fatalf("second Upgrade = %+v, %v", r, err)
	}
	if got := runIn(t, c, "old", "cat kept"); got != "keep" {
		t.Errorf("workspace after the upgrade: kept = %q", got)
	}

	u, err := c.Usage(ctx)
	if err != nil || !slices.Contains(u.Unmeasured, "today") || u.Today != 0 {
		t.Fatalf("Usage = %+v, %v", u, err)
	}
}
