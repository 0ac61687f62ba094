package offload

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A back killed while it changed the work tree (kill -9, a power loss)
// leaves some of the box's files written and the rest as they were, its
// index lock, and maybe HEAD moved: the next command puts the files,
// HEAD and the index back as they were before it (resumeApply), after
// which back merges again. Each case makes the state such a kill leaves
// from the journal's own record of the update.
func TestResumeApply(t *testing.T) {
	for _, tc := range []struct {
		name string
		// written are the files as the box has them; moved: HEAD moved.
		written  []string
		moved    bool
		lock     bool
		changed  string // a file edited since, as neither
		wantErr  string
		finished bool
	}{
		{name: "killed before any file", lock: true},
		{name: "killed halfway", written: []string{"a.txt", "new/box.txt"}, lock: true},
		{name: "killed once HEAD moved", written: []string{"a.txt", "c.txt", "new/box.txt"}, moved: true, lock: true},
		{name: "a file changed since", written: []string{"a.txt"}, changed: "c.txt", lock: true, wantErr: "c.txt is neither as before it nor as the box has them"},
		{name: "a file changed since, HEAD moved", written: []string{"a.txt", "c.txt", "new/box.txt"}, moved: true, changed: "a.txt", lock: true, wantErr: "a.txt is neither as before it nor as the box has them"},
		{name: "killed after the index was written", written: []string{"a.txt", "c.txt", "new/box.txt"}, moved: true, finished: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := testEnv(t)
			r := newRepo(t, env, map[string]string{"a.txt": "a\n", "b.txt": "b\n", "c.txt": "c\n"})
			writeFiles(t, r.Top, map[string]string{"b.txt": "b edited here\n"})
			s, br := offloadTo(t, env, r)
			boxCommit(t, env, br, map[string]string{"a.txt": "a from the box\n", "new/box.txt": "made in the box\n"}, "box: a, new/box.txt")
			run(t, br.Top, env, "git", "rm", "-q", "c.txt")
			run(t, br.Top, env, "git", "commit", "-qm", "box: no c.txt")
			boxBack(t, env, r, br)
			head := run(t, r.Top, env, "git", "rev-parse", "HEAD")
			before, index := files(t, r.Top), run(t, r.Top, env, "git", "ls-files", "-s")

			// The journal of the update, taken where back writes it.
			var j *MergeJournal
			stop := errors.New("stop before the update")
			_, err := r.mergeBackHooks(context.Background(), testID, s, RefBack+testID, backTime, &mergeHooks{
				applying: func(mj *MergeJournal) error { j = mj; return stop },
			})
			if !errors.Is(err, stop) || j == nil || j.MoveTo == "" {
				t.Fatalf("merge: %v, journal %+v; want it stopped at a fast-forward's update", err, j)
			}

			// The state the kill left.
			box := map[string]string{"a.txt": "a from the box\n", "new/box.txt": "made in the box\n"}
			for _, p := range tc.written {
				if p == "c.txt" {
					os.Remove(filepath.Join(r.Top, p))
					continue
				}
				writeFiles(t, r.Top, map[string]string{p: box[p]})
			}
			if tc.changed != "" {
				writeFiles(t, r.Top, map[string]string{tc.changed: "edited since\n"})
			}
			if tc.moved {
				run(t, r.Top, env, "git", "update-ref", "HEAD", j.MoveTo)
			}
			lockPath := filepath.Join(r.GitDir, "index.lock")
			if tc.lock {
				dead := exec.Command("true")
				if err := dead.Run(); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(lockPath, []byte("the index back built"), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Link(lockPath, lockPath+lockMarkPrefix+strconv.Itoa(dead.Process.Pid)); err != nil {
					t.Fatal(err)
				}
			}
			stateBefore := files(t, r.Top)

			finished, err := r.resumeApply(context.Background(), "back was interrupted during apply", testID, j)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error with %q", err, tc.wantErr)
				}
				if diff := cmp.Diff(stateBefore, files(t, r.Top)); diff != "" {
					t.Errorf("the work tree changed (-before +after):\n%s", diff)
				}
				// HEAD and the index are as before it, so the restore the
				// error names works (our stale lock would fail it), and
				// then the resume goes on.
				if got := run(t, r.Top, env, "git", "rev-parse", "HEAD"); got != head {
					t.Errorf("HEAD %s, want %s as before back", got, head)
				}
				if _, err := os.Lstat(lockPath); err == nil {
					t.Error("our stale index.lock is still there: the restore the error names cannot run")
				}
				run(t, r.Top, env, "git", "restore", "--source="+j.Work, "--worktree", "--", ":/")
				if finished, err := r.resumeApply(context.Background(), "back was interrupted during apply", testID, j); err != nil || finished {
					t.Fatalf("after the restore: %v, %v; want it undone", finished, err)
				}
				if diff := cmp.Diff(before, files(t, r.Top)); diff != "" {
					t.Errorf("work tree not as before back (-want +got):\n%s", diff)
				}
				if got := run(t, r.Top, env, "git", "ls-files", "-s"); got != index {
					t.Errorf("index:\n%s\nwant as before back:\n%s", got, index)
				}
				return
			}
			if err != nil || finished != tc.finished {
				t.Fatalf("got %v, %v; want finished %v", finished, err, tc.finished)
			}
			if tc.finished {
				return
			}
			if diff := cmp.Diff(before, files(t, r.Top)); diff != "" {
				t.Errorf("work tree not as before back (-want +got):\n%s", diff)
			}
			if got := run(t, r.Top, env, "git", "rev-parse", "HEAD"); got != head {
				t.Errorf("HEAD %s, want %s as before back", got, head)
			}
			if got := run(t, r.Top, env, "git", "ls-files", "-s"); got != index {
				t.Errorf("index:\n%s\nwant as before back:\n%s", got, index)
			}
			if _, err := os.Lstat(lockPath); err == nil {
				t.Error("index.lock is still there")
			}
			if _, err := os.Stat(filepath.Join(r.Top, "new")); err == nil {
				t.Error("new/, which only the box's file made, is still there")
			}
			run(t, r.Top, env, "git", "fsck", "--no-dangling")

			// Back again merges as the first would have.
			m, err := r.mergeBack(context.Background(), testID, s, RefBack+testID, backTime)
			if err != nil || m.Outcome != FastForward {
				t.Fatalf("back again: %+v, %v; want a fast-forward", m, err)
			}
			want := map[string]string{"a.txt": "-rw-r--r-- a from the box\n", "b.txt": "-rw-r--r-- b edited here\n", "new/box.txt": "-rw-r--r-- made in the box\n"}
			if diff := cmp.Diff(want, files(t, r.Top)); diff != "" {
				t.Errorf("after back again (-want +got):\n%s", diff)
			}
		})
	}
}

// workEntries hashes files whose names git's --stdin-paths would split
// or unquote (a newline, a carriage return at the end, a leading quote, a
// backslash) as git hash-object of each does: a back killed in apply
// over such a file failed its resume for good ("could not open 'new'").
func TestWorkEntriesOddNames(t *testing.T) {
	env := testEnv(t)
	names := []string{"new\nline.txt", "cr\r", "\"quoted\"", "back\\slash", "tab\tname", "plain.txt"}
	files := map[string]string{}
	for i, n := range names {
		files[n] = strconv.Itoa(i) + "\n"
	}
	r := newRepo(t, env, files)
	got, err := r.workEntries(context.Background(), names)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, n := range names {
		want[n] = "100644 " + strings.TrimSpace(run(t, r.Top, env, "git", "hash-object", "--", n))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("workEntries (-want +got):\n%s", diff)
	}
}
