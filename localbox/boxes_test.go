package localbox_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/localbox"
	controlv1 "github.com/cocoonbox/cocoonbox/proto/cocoonbox/control/v1"
)

// runIn runs line in box and returns its stdout, failing the test unless it
// exits 0.
func runIn(t *testing.T, c *box.Client, boxName, line string) string {
	t.Helper()
	var out, errb bytes.Buffer
	st, err := c.Exec(context.Background(), &box.Command{Box: boxName, Line: line, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb})
	if err != nil || st.Code != 0 {
		t.Fatalf("%s in %s: %v %+v: %s", line, boxName, err, st, errb.String())
	}
	return out.String()
}

// Boxes.Create makes a box that Exec reaches; a second Create of the name
// is ALREADY_EXISTS, a bad name or image INVALID_ARGUMENT. Delete without
// confirm is refused and leaves the box; with it, an Exec open in the box
// ends, the directory is gone, a link planted in the box's home to a file
// outside leaves that file as it was, and the box is NOT_FOUND after.
func TestCreateDelete(t *testing.T) {
	// Run by root, as the box user: root deletes no box as itself.
	dir := t.TempDir()
	srv := &localbox.Server{Dir: dir, Logf: t.Logf}
	if os.Geteuid() == 0 {
		for _, d := range []string{filepath.Dir(dir), dir} {
			os.Chmod(d, 0o711)
		}
		srv.User = localbox.DefaultUser
	}
	lis, base, err := localbox.Listen(dir, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	run(t, srv, lis)
	tok, err := localbox.IssueToken(dir, "test", "cli")
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, base, tok)
	b, err := c.Create(t.Context(), "work", "")
	if err != nil || b.Name != "work" || b.State != "running" || !strings.HasPrefix(b.ID, "box_") {
		t.Fatalf("Create = %+v, %v", b, err)
	}
	if _, err := c.Create(t.Context(), "work", ""); status.Code(errors.Unwrap(err)) != codes.AlreadyExists && !strings.Contains(err.Error(), "already") {
		t.Errorf("second Create: %v, want ALREADY_EXISTS", err)
	}
	// Requests box.Client would not send, on a connection of the test's.
	ep, err := box.ParseEndpoint(base)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(ep.Target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	raw := controlv1.NewBoxesClient(cc)
	signed := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+tok)
	for _, req := range []*controlv1.CreateRequest{{Name: "Bad_Name"}, {Name: "ok", Image: "ubuntu"}} {
		if _, err := raw.Create(signed, req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("Create(%v): %v, want INVALID_ARGUMENT", req, err)
		}
	}
	// Names that would be paths: each is refused by name, and nothing is
	// made or removed, in the state directory or above it.
	before := tree(t, filepath.Dir(dir))
	bad := []string{"../x", "/x", "x/y", "", ".", "..", "../boxes/main", "-x", strings.Repeat("a", 64), "main\n", "tokens.json"}
	for _, name := range bad {
		if _, err := raw.Create(signed, &controlv1.CreateRequest{Name: name}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "bad box name") {
			t.Errorf("Create(%q): %v, want INVALID_ARGUMENT naming the bad box name", name, err)
		}
		if _, err := raw.Delete(signed, &controlv1.DeleteRequest{Box: name, Confirm: true}); status.Code(err) != codes.NotFound {
			t.Errorf("Delete(%q): %v, want NOT_FOUND", name, err)
		}
	}
	if _, err := os.Lstat("/x"); err == nil {
		t.Errorf("/x exists")
	}
	if after := tree(t, filepath.Dir(dir)); !slices.Equal(before, after) {
		t.Errorf("bad box names changed the files:\nbefore %q\nafter  %q", before, after)
	}
	if got := runIn(t, c, "work", "pwd"); strings.TrimSpace(got) != filepath.Join(dir, "boxes", "work", "workspace") {
		t.Errorf("pwd in work = %q", got)
	}
	runIn(t, c, "work", "echo secret > ~/file; ln -s "+filepath.Join(dir, "standin")+" ~/link; mkdir ~/d; ln -s "+dir+" ~/d/dirlink")
	standin := filepath.Join(dir, "standin")
	if err := os.WriteFile(standin, []byte("keep me\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	if _, err := raw.Delete(signed, &controlv1.DeleteRequest{Box: "work"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("Delete without confirm: %v, want INVALID_ARGUMENT", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "boxes", "work", "home", "file")); err != nil {
		t.Fatalf("a refused delete removed the box: %v", err)
	}

	pr, pw := io.Pipe()
	defer pw.Close()
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(context.Background(), &box.Command{Box: "work", Line: "echo up; exec sleep 600", Stdin: pr, Stdout: notify{started}, Stderr: io.Discard})
		done <- err
	}()
	<-started
	id, err := c.Delete(t.Context(), "work")
	if err != nil || id != b.ID {
		t.Fatalf("Delete = %q, %v; want %s", id, err, b.ID)
	}
	<-done
	if _, err := os.Lstat(filepath.Join(dir, "boxes", "work")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the box's directory is still there: %v", err)
	}
	if got, err := os.ReadFile(standin); err != nil || string(got) != "keep me\n" {
		t.Errorf("the stand-in the link named: %q, %v; want it untouched", got, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "tokens.json")); err != nil {
		t.Errorf("the state the directory link named: %v", err)
	}
	if _, err := c.Delete(t.Context(), "work"); !errors.Is(err, box.ErrNotFound) {
		t.Errorf("deleting it again: %v, want NOT_FOUND", err)
	}
	boxes, err := c.List(t.Context())
	if err != nil || len(boxes) != 1 || boxes[0].Name != localbox.DefaultBox {
		t.Errorf("List after delete = %+v, %v; want main alone", boxes, err)
	}
}

// tree lists the paths under dir down to three levels (a box's
// directory, under the state directory, under a test's temporary one),
// less the server's own files that calls change.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if strings.Count(rel, string(filepath.Separator)) >= 3 {
			return fs.SkipDir
		}
		switch d.Name() {
		case "localbox.sock", "tokens.json", "tokens.json.lock", "procs":
			return nil
		}
		out = append(out, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
