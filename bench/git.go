package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// gitWork holds the git and rsync workloads: a repository made from a real
// source tree with several hundred commits, served by sshd from the work
// directory and by the box from a copy the box user made in its workspace
// (toBox). The same path for both would not do: served by root, the local
// box runs commands as the box user, whose git refuses a repository root
// owns ("dubious ownership"), and root's git one the box user owns.
type gitWork struct {
	e   *env
	dir string
}

func (g *gitWork) bare() string { return filepath.Join(g.dir, "src.git") }

// setup builds the repository once per run (build) and copies it into
// the box (toBox).
func (g *gitWork) setup() error {
	if err := g.build(); err != nil {
		return err
	}
	return g.toBox()
}

// build builds the repository once: the tree's files in *commits
// commits, directory by directory, then a bare clone to serve.
func (g *gitWork) build() error {
	if _, err := os.Stat(g.bare()); err == nil {
		return nil
	}
	fmt.Fprintf(os.Stderr, "building a %d-commit repository from %s...\n", *commits, *srcTree)
	wt := filepath.Join(g.dir, "build")
	if err := os.MkdirAll(wt, 0o755); err != nil {
		return err
	}
	if err := runIn(wt, "git", "init", "-q", "-b", "main"); err != nil {
		return err
	}
	var files []string
	filepath.Walk(*srcTree, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			rel, _ := filepath.Rel(*srcTree, p)
			files = append(files, rel)
		}
		return nil
	})
	sort.Strings(files)
	if len(files) == 0 {
		return fmt.Errorf("no files under %s", *srcTree)
	}
	per := (len(files) + *commits - 1) / *commits
	for i := 0; i < len(files); i += per {
		chunk := files[i:min(i+per, len(files))]
		tar := exec.Command("sh", "-c", "tar cf - -C \"$0\" -T - | tar xf - -C \"$1\"", *srcTree, wt)
		tar.Stdin = strings.NewReader(strings.Join(chunk, "\n") + "\n")
		if out, err := tar.CombinedOutput(); err != nil {
			return fmt.Errorf("copy files: %v: %s", err, out)
		}
		if err := runIn(wt, "git", "add", "-A"); err != nil {
			return err
		}
		msg := fmt.Sprintf("add %s .. %s", chunk[0], chunk[len(chunk)-1])
		// gc --auto, which a commit may start, runs before the next step:
		// detached, it packed and pruned objects while the bare clone
		// below copied them ("failed to copy file").
		if err := runIn(wt, "git", "-c", "user.name=bench", "-c", "user.email=bench@example.com", "-c", "gc.autoDetach=false", "commit", "-q", "-m", msg); err != nil {
			return err
		}
	}
	return runIn(g.dir, "git", "clone", "-q", "--bare", wt, g.bare())
}

// boxGitDir is the box's directory for the git rows, in its workspace.
const boxGitDir = "cocoonbox-bench-git"

// toBox copies the bare repository into the box through the box itself
// (a tar stream into an Exec), so that the box user owns its copy, and
// records the copy's absolute path; once a run.
func (g *gitWork) toBox() error {
	if g.e.boxGit != "" {
		return nil
	}
	c := g.e.ours("cocoonbox-ssh", "main", fmt.Sprintf("rm -rf %[1]s && mkdir %[1]s && tar xf - -C %[1]s && cd %[1]s && pwd", boxGitDir))
	tar := exec.Command("tar", "cf", "-", "-C", g.dir, filepath.Base(g.bare()))
	var tarErr strings.Builder
	tar.Stderr = &tarErr
	var err error
	if c.Stdin, err = tar.StdoutPipe(); err != nil {
		return err
	}
	if err := tar.Start(); err != nil {
		return err
	}
	out, err := c.Output()
	// GNU tar's status 1 is "some files differed" (one changed as it was
	// read: the archive is whole); the box's tar took it.
	if werr := tar.Wait(); err == nil && werr != nil {
		if tar.ProcessState.ExitCode() != 1 {
			err = fmt.Errorf("tar: %w: %s", werr, tarErr.String())
		} else {
			fmt.Fprintf(os.Stderr, "copy the repository into the box: tar: %s", tarErr.String())
		}
	}
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			err = fmt.Errorf("%w: %s", err, ee.Stderr)
		}
		return fmt.Errorf("copy the repository into the box: %w", err)
	}
	g.e.boxGit = strings.TrimSpace(string(out))
	return nil
}

func runIn(dir string, name string, args ...string) error {
	c := exec.Command(name, args...)
	c.Dir = dir
	out, err := c.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

func (g *gitWork) cloneDir(ours bool) string {
	if ours {
		return filepath.Join(g.dir, "clone-ours")
	}
	return filepath.Join(g.dir, "clone-ssh")
}

func (g *gitWork) url(ours bool) string {
	if ours {
		return "cocoonbox::main:" + filepath.Join(g.e.boxGit, filepath.Base(g.bare()))
	}
	return "ssh://bench" + g.bare()
}

func (g *gitWork) clone(ours bool) func() (time.Duration, int64, error) {
	return func() (time.Duration, int64, error) {
		dst := g.cloneDir(ours)
		os.RemoveAll(dst)
		c := g.cmd(ours, "git", "clone", "-q", g.url(ours), dst)
		// git's own RSS says nothing of our client's.
		d, _, err := timed(c)
		return d, 0, err
	}
}

func (g *gitWork) fetch(ours bool) func() (time.Duration, int64, error) {
	return func() (time.Duration, int64, error) {
		c := g.cmd(ours, "git", "-C", g.cloneDir(ours), "fetch", "-q")
		d, _, err := timed(c)
		return d, 0, err
	}
}

func (g *gitWork) cmd(ours bool, name string, args ...string) *exec.Cmd {
	if ours {
		return g.e.ours(name, args...)
	}
	return g.e.theirs(name, args...)
}

func (g *gitWork) setupRsync() error {
	// The tree rsync copies is the repository's build work tree.
	return g.setup()
}

func (g *gitWork) rsync(ours, first bool) func() (time.Duration, int64, error) {
	return func() (time.Duration, int64, error) {
		src := filepath.Join(g.dir, "build") + "/"
		dst := filepath.Join(g.dir, "rsync-ssh")
		args := []string{"-a", "--delete", "-e", "ssh -F " + g.e.sshCfg, src, "bench:" + dst + "/"}
		if ours {
			dst = filepath.Join(g.e.boxGit, "rsync-ours")
			args = []string{"-a", "--delete", "-e", "cocoonbox-ssh", src, "main:" + dst + "/"}
		}
		if first && ours {
			// The box user's copy goes as that user, through the box.
			if out, err := g.e.ours("cocoonbox-ssh", "main", "rm -rf "+dst).CombinedOutput(); err != nil {
				return 0, 0, fmt.Errorf("remove the box's copy: %v: %s", err, out)
			}
		} else if first {
			os.RemoveAll(dst)
		}
		d, _, err := timed(g.cmd(ours, "rsync", args...))
		return d, 0, err
	}
}
