package offload

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDataDir(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	tests := []struct {
		goos string
		env  map[string]string
		want string
	}{
		{"linux", map[string]string{"HOME": "/h"}, "/h/.local/share/cocoonbox"},
		{"linux", map[string]string{"HOME": "/h", "XDG_DATA_HOME": "/d"}, "/d/cocoonbox"},
		{"linux", map[string]string{"HOME": "/h", "XDG_DATA_HOME": "rel"}, "/h/.local/share/cocoonbox"},
		{"darwin", map[string]string{"HOME": "/Users/u", "XDG_DATA_HOME": "/d"}, "/Users/u/Library/Application Support/CocoonBox"},
	}
	for _, tc := range tests {
		got, err := DataDir(tc.goos, env(tc.env))
		if err != nil || got != tc.want {
			t.Errorf("DataDir(%s, %v) = %q, %v; want %q", tc.goos, tc.env, got, err, tc.want)
		}
	}
	if _, err := DataDir("linux", env(nil)); err == nil {
		t.Error("no HOME: want an error")
	}
}

func TestRecord(t *testing.T) {
	st := Store{Dir: filepath.Join(t.TempDir(), "offload")}
	if _, err := st.LoadRecord("k"); !errors.Is(err, ErrNoRecord) {
		t.Fatalf("got %v, want ErrNoRecord", err)
	}
	rec := &Record{ID: "0123456789abcdef", Repo: "k", Box: "b1", BoxName: "main", Name: "app", Dir: "/workspace/app",
		Kind: "claude", Base: strings.Repeat("a", 40), Top: "/src/app", StartedAtMS: 1, Seen: 2}
	if err := st.SaveRecord(rec); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{st.Dir: 0o700, st.RepoDir("k"): 0o700, filepath.Join(st.RepoDir("k"), "offload.json"): 0o600} {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, %v; want %v", p, fi.Mode().Perm(), err, want)
		}
	}
	got, err := st.LoadRecord("k")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rec, got); diff != "" {
		t.Errorf("(-saved +loaded):\n%s", diff)
	}
	ents, _ := os.ReadDir(st.RepoDir("k"))
	for _, e := range ents {
		if e.Name() != "offload.json" && e.Name() != "record.lock" {
			t.Errorf("the repo directory holds %s, want only offload.json and record.lock (no temp file left)", e.Name())
		}
	}

	// inbox raises Seen while a back journals its steps: neither loses
	// the other's change.
	if err := st.UpdateSeen("k", rec.ID, 7); err != nil {
		t.Fatal(err)
	}
	rec.Op, rec.Step = OpBack, StepFetch
	if err := st.SaveRecord(rec); err != nil {
		t.Fatal(err)
	}
	got, err = st.LoadRecord("k")
	if err != nil || got.Seen != 7 || got.Step != StepFetch {
		t.Fatalf("after UpdateSeen and a journal write: %+v, %v; want seen 7, step fetch", got, err)
	}
	if err := st.UpdateSeen("k", "another", 9); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.LoadRecord("k"); got.Seen != 7 {
		t.Errorf("another offload's seen changed the record: %d", got.Seen)
	}
	if err := st.RemoveRecord("k"); err != nil {
		t.Fatal(err)
	}
	if err := st.RemoveRecord("k"); err != nil {
		t.Fatalf("removing no record: %v", err)
	}
	if _, err := st.LoadRecord("k"); !errors.Is(err, ErrNoRecord) {
		t.Fatalf("after remove: %v", err)
	}
}

func TestSettings(t *testing.T) {
	st := Store{Dir: filepath.Join(t.TempDir(), "offload")}
	err := st.UpdateSettings("k", "/src/app", func(s *RepoSettings) error {
		s.Secrets = append(s.Secrets, "file:.env", "aws", "file:.env")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	all, err := st.LoadSettings()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Settings{"k": {Top: "/src/app", Secrets: []string{"aws", "file:.env"}}}, all); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	p := filepath.Join(st.Dir, "repos.json")
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Errorf("repos.json mode %v", fi.Mode().Perm())
	}
	os.Chmod(p, 0o644)
	if _, err := st.LoadSettings(); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a 0644 repos.json: got %v, want a refusal naming chmod 600", err)
	}
	os.Chmod(p, 0o600)
	os.Chmod(st.Dir, 0o755)
	if _, err := st.EnsureRepoDir("k"); err == nil || !strings.Contains(err.Error(), "chmod 700") {
		t.Errorf("a 0755 offload directory: got %v, want a refusal naming chmod 700", err)
	}
}

func TestReadHandover(t *testing.T) {
	st := Store{Dir: filepath.Join(t.TempDir(), "offload")}
	code := func(err error) int {
		var e *Error
		if errors.As(err, &e) {
			return e.Code
		}
		return 0
	}
	if _, err := ReadHandover(st, "k"); code(err) != ExitRefused {
		t.Errorf("no hand-over: %v", err)
	}
	st.EnsureRepoDir("k")
	os.WriteFile(st.HandoverPath("k"), HandoverTemplate(), 0o600)
	if _, err := ReadHandover(st, "k"); code(err) != ExitRefused || !strings.Contains(err.Error(), "template") {
		t.Errorf("the template: %v", err)
	}
	os.WriteFile(st.HandoverPath("k"), []byte("# Hand-over: x\n"), 0o600)
	if _, err := ReadHandover(st, "k"); code(err) != ExitRefused || len(problems(err)) != 1 || !strings.HasPrefix(problems(err)[0], "lacks ## Goal") {
		t.Errorf("headings missing: %v", err)
	}
	good := validHandover("make", "none")
	os.WriteFile(st.HandoverPath("k"), good, 0o600)
	if b, err := ReadHandover(st, "k"); err != nil || string(b) != string(good) {
		t.Errorf("a good hand-over: %v", err)
	}
	os.Remove(st.HandoverPath("k"))
	os.Symlink("/etc/passwd", st.HandoverPath("k"))
	if _, err := ReadHandover(st, "k"); code(err) != ExitRefused {
		t.Errorf("a symlink: %v", err)
	}
}

// TestUpdateSettingsConcurrent runs many read-modify-writes of repos.json
// at once, as parallel `offload secrets add` and `remove` do: every change
// is kept.
func TestUpdateSettingsConcurrent(t *testing.T) {
	st := Store{Dir: filepath.Join(t.TempDir(), "offload")}
	if err := st.UpdateSettings("shared", "/src/shared", func(s *RepoSettings) error {
		s.Secrets = []string{"aws", "kube"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	const n = 24
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		wg.Go(func() {
			key := fmt.Sprintf("repo%02d", i)
			errs <- st.UpdateSettings(key, "/src/"+key, func(s *RepoSettings) error {
				s.Secrets = append(s.Secrets, "aws")
				return nil
			})
		})
		wg.Go(func() {
			errs <- st.UpdateSettings("shared", "/src/shared", func(s *RepoSettings) error {
				s.Secrets = append(s.Secrets, fmt.Sprintf("ssh:key%02d", i))
				return nil
			})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	all, err := st.LoadSettings()
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if key := fmt.Sprintf("repo%02d", i); !slices.Equal(all[key].Secrets, []string{"aws"}) {
			t.Errorf("%s: secrets %v, want [aws]", key, all[key].Secrets)
		}
	}
	if got := len(all["shared"].Secrets); got != n+2 {
		t.Errorf("shared: %d secrets, want %d: %v", got, n+2, all["shared"].Secrets)
	}
}
