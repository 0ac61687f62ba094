package boxagent

import (
	"github.com/cocoonbox/cocoonbox/agentwire"
	"github.com/cocoonbox/cocoonbox/handover"

	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// AcceptWait is how long send waits for the CLI to take its first prompt.
const AcceptWait = 30 * time.Second

// Send runs the send steps (contract "send steps (box)") on the stream in
// r. Before the inbox accepts the session, a failure wipes the repo's
// secrets, empties stage/ and releases the copy; a refused stream changes
// nothing.
func (c *Config) Send(o agentwire.SendRequest, r io.Reader) (*agentwire.SendResult, error) {
	unlock, err := c.holdOffload(o.Repo, o.Kind, o.ID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	rec, err := c.readRecord(o.Repo)
	if err != nil {
		return nil, err
	}
	switch {
	case rec == nil || rec.copyState() == CopyAbsent:
		return nil, refusedf("no copy of %s in this box; run begin first", o.Repo)
	case rec.OffloadID != o.ID:
		return nil, refusedf("the copy of %s is not taken for offload %s; run begin first", o.Repo, o.ID)
	case rec.running():
		return nil, refusedf("a session of %s runs in this box", o.Repo)
	}
	res := &agentwire.SendResult{OK: true, TimingsMS: map[string]int64{}}
	t0 := time.Now()
	step := func(name string) {
		res.TimingsMS[name] = time.Since(t0).Milliseconds()
		t0 = time.Now()
	}
	stage := c.stageDir(o.Repo)
	incoming := c.SecretsDir(o.Repo) + ".incoming"
	if err := c.step(o.Repo, StepRead, nil); err != nil {
		return nil, err
	}
	// From here on the journal names each step before it runs.
	os.RemoveAll(incoming)
	if err := emptyDir(stage); err != nil {
		return nil, c.releaseAfter(o.Repo, err)
	}
	defer emptyDir(stage)

	c.logf("reading the send stream")
	st, err := readStream(r, stage, incoming)
	if err != nil {
		os.RemoveAll(incoming)
		if se, ok := errors.AsType[*StreamError](err); ok {
			c.clearStep(o.Repo)
			return nil, &Error{Code: agentwire.CodeRefused, Err: se}
		}
		return nil, c.releaseAfter(o.Repo, err)
	}
	if err := checkMembers(st, o); err != nil {
		os.RemoveAll(incoming)
		c.clearStep(o.Repo)
		return nil, err
	}
	step("read")

	fail := func(err error) (*agentwire.SendResult, error) {
		os.RemoveAll(incoming)
		return nil, c.releaseAfter(o.Repo, err)
	}
	dir := rec.Dir
	var base string
	if !o.NoRepo {
		if err := c.step(o.Repo, StepIndex, nil); err != nil {
			return fail(err)
		}
		if _, err := os.Stat(filepath.Join(dir, ".git")); err != nil {
			if st.HEAD == nil {
				return fail(fmt.Errorf("the copy %s has no .git: rsync the work tree first", dir))
			}
			// A linked worktree travels without .git: the copy becomes a
			// plain repository built from the bundle.
			if _, err := c.git(dir, nil, nil, "init", "-q"); err != nil {
				return fail(err)
			}
		}
		c.dropFsmonitor(dir)
		if st.Bundle != "" {
			c.logf("indexing the bundle")
			if err := c.indexBundle(dir, st.Bundle); err != nil {
				return fail(err)
			}
			os.Remove(st.Bundle)
			step("index")
		}
		if err := c.step(o.Repo, StepCheck, nil); err != nil {
			return fail(err)
		}
		if st.HEAD != nil {
			if err := os.WriteFile(filepath.Join(dir, ".git", "HEAD"), st.HEAD, 0o644); err != nil {
				return fail(err)
			}
		}
		if st.Index != "" {
			b, err := os.ReadFile(st.Index)
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, ".git", "index"), b, 0o644)
			}
			if err != nil {
				return fail(err)
			}
		}
		base, err = c.git1(dir, "rev-parse", "--verify", "-q", "refs/cocoonbox/offload/"+o.ID+"^{commit}")
		if err != nil || base == "" {
			return fail(fmt.Errorf("the copy has no refs/cocoonbox/offload/%s (S): send a bundle that carries it", o.ID))
		}
		// A linked worktree's index came in the stream, without its mtime.
		if err := c.refreshCopy(dir, base, st.Index == ""); err != nil {
			return fail(err)
		}
		step("check")
	}

	// The record names the secrets before they are placed, so that a send
	// that dies among them has their links wiped.
	if err := c.step(o.Repo, StepSecrets, func(r *record) { r.Secrets = st.Secrets }); err != nil {
		return fail(err)
	}
	if err := c.placeSecrets(o.Repo, dir, incoming, st.Secrets); err != nil {
		return fail(err)
	}
	step("secrets")
	if err := c.step(o.Repo, StepExcludes, nil); err != nil {
		return fail(err)
	}
	var ignored []string
	if !o.NoRepo {
		rel, err := c.ignoredDirs(dir)
		if err != nil {
			return fail(err)
		}
		for _, d := range rel {
			ignored = append(ignored, filepath.Join(dir, d))
		}
	}
	if _, err := c.update(o.Repo, func(r *record) (*record, error) {
		if r == nil {
			return nil, errors.New("the record went away")
		}
		r.Ignored, r.Base, r.Secrets, r.NoRepo = ignored, base, st.Secrets, o.NoRepo
		return r, nil
	}); err != nil {
		return fail(err)
	}
	if err := c.updateShared(nil); err != nil {
		return fail(err)
	}
	if st.EnvJSON != nil {
		if err := os.WriteFile(filepath.Join(c.repoDir(o.Repo), "env.json"), st.EnvJSON, 0o600); err != nil {
			return fail(err)
		}
	}
	step("excludes")

	if o.Prepare {
		if _, err := c.call(Request{Op: "send", Repo: o.Repo, CLI: o.Kind, OffloadID: o.ID, Start: true, Prepare: true}); err != nil {
			return fail(err)
		}
		c.clearStep(o.Repo)
		res.Delivery = "started"
		step("prepare")
		return res, nil
	}

	if err := c.step(o.Repo, StepTrust, nil); err != nil {
		return fail(err)
	}
	if err := c.presetTrust(o.Kind, dir); err != nil {
		return fail(err)
	}
	step("trust")
	if err := os.WriteFile(filepath.Join(c.repoDir(o.Repo), "handover.sent.md"), st.Handover, 0o600); err != nil {
		return fail(err)
	}
	os.Remove(filepath.Join(c.repoDir(o.Repo), "handover.md"))
	p := promptInput{Dir: dir, HandoverOut: filepath.Join(c.repoDir(o.Repo), "handover.md"), Base: base, Env: st.EnvJSON, Handover: st.Handover}
	c.attachments(dir, &p)
	if err := c.step(o.Repo, StepStart, nil); err != nil {
		return fail(err)
	}
	start := nowMS()
	c.logf("starting %s", agentwire.KindOf(o.Kind).Binary())
	resp, err := c.call(Request{Op: "send", Repo: o.Repo, Name: rec.Name, CLI: o.Kind, OffloadID: o.ID, Body: composePrompt(p), Start: true})
	if err != nil {
		return fail(err)
	}
	res.Delivery, res.Tmux = resp.Delivery, SessionName(o.Repo, o.Kind)
	step("start")

	c.logf("waiting for %s to take the prompt", agentwire.KindOf(o.Kind).Binary())
	res.Accepted = c.waitAccepted(o.Repo, start)
	if !res.Accepted {
		if s, err := c.sessions(o.Repo); err == nil && len(s) == 1 && s[0].Status == StatusStopped {
			res.Exited, res.ExitLines = true, s[0].ExitLines
		} else {
			res.Screen = c.tmuxLastLines(res.Tmux, exitLines)
		}
	}
	step("accept")
	return res, nil
}

// checkMembers checks that the stream carried what the flags say it must.
func checkMembers(st *stream, o agentwire.SendRequest) error {
	if !o.Prepare {
		if st.Handover == nil {
			return refusedf("send stream: no handover.md")
		}
		if err := handover.Validate(st.Handover); err != nil {
			return &Error{Code: agentwire.CodeRefused, Err: err}
		}
	}
	if !o.NoRepo {
		if st.EnvJSON == nil {
			return refusedf("send stream: no env.json")
		}
		var e agentwire.Environment
		if err := json.Unmarshal(st.EnvJSON, &e); err != nil || e.V != 1 {
			return refusedf("send stream: env.json is not a version 1 environment")
		}
	} else if st.Bundle != "" || st.HEAD != nil || st.Index != "" {
		return refusedf("send stream: --no-repo carries no history")
	}
	if (st.HEAD == nil) != (st.Index == "") {
		return refusedf("send stream: a linked worktree sends both HEAD and index")
	}
	return nil
}

// waitAccepted waits until the CLI takes its first prompt: a hook after
// start, else a transcript written after it, for at most AcceptWait.
func (c *Config) waitAccepted(k string, start int64) bool {
	deadline := time.Now().Add(AcceptWait)
	for {
		if s, err := c.sessions(k); err == nil && len(s) == 1 {
			if s[0].HookAtMS >= start || s[0].TranscriptMtimeMS >= start {
				return true
			}
			if s[0].Status == StatusStopped {
				return false
			}
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// releaseAfter is the failure path before the inbox accepts: wipe the
// secrets, release the copy, and report err as failed.
func (c *Config) releaseAfter(k string, err error) error {
	e := asError(err)
	c.wipeSecrets(k, true)
	c.update(k, func(r *record) (*record, error) {
		if r == nil || r.running() {
			return nil, nil
		}
		r.OffloadID, r.Step, r.Secrets = "", "", nil
		return r, nil
	})
	c.logf("released the copy of %s", k)
	return e
}

// clearStep clears the journal of k's send: it ended with nothing to
// undo.
func (c *Config) clearStep(k string) {
	c.update(k, func(r *record) (*record, error) {
		if r == nil || r.Step == "" {
			return nil, nil
		}
		r.Step = ""
		return r, nil
	})
}

// plainParents checks that every directory on the way from the copy dir
// to the secret's repository path rel is a plain directory (Lstat: a
// symlink is not followed) or not there yet.
func plainParents(dir, rel string) error {
	parts := strings.Split(filepath.ToSlash(rel), "/")
	p := dir
	for i, part := range parts[:len(parts)-1] {
		p = filepath.Join(p, part)
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if !fi.Mode().IsDir() {
			what := "not a directory"
			if fi.Mode()&os.ModeSymlink != 0 {
				what = "a symlink"
			}
			return fmt.Errorf("secret file:%s: %s in the copy is %s; a secret is placed only through plain directories of the copy", rel, strings.Join(parts[:i+1], "/"), what)
		}
	}
	return nil
}

func emptyDir(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.MkdirAll(dir, 0o700)
}

// placeSecrets moves the secrets the stream brought into the repo's
// secrets directory, replacing the last ones, and links each file: entry
// into the copy.
func (c *Config) placeSecrets(k, dir, incoming string, entries []string) error {
	// A link is made only through plain directories of the copy: a
	// symlinked parent (evil -> /outside) would put it outside.
	for _, e := range entries {
		if rel, ok := secretRepoPath(e); ok {
			if err := plainParents(dir, rel); err != nil {
				return &Error{Code: agentwire.CodeRefused, Err: err}
			}
		}
	}
	c.wipeSecrets(k, false)
	if len(entries) == 0 {
		return nil
	}
	final := c.SecretsDir(k)
	if err := os.MkdirAll(filepath.Dir(final), 0o700); err != nil {
		return err
	}
	if err := os.Rename(incoming, final); err != nil {
		return err
	}
	if err := os.Chmod(final, 0o700); err != nil {
		return err
	}
	for _, e := range entries {
		rel, ok := secretRepoPath(e)
		if !ok {
			continue
		}
		link := filepath.Join(dir, filepath.FromSlash(rel))
		if fi, err := os.Lstat(link); err == nil && fi.Mode()&os.ModeSymlink == 0 {
			c.logf("secret %s: %s exists in the copy; left as it is", strings.SplitN(e, ":", 2)[0], rel)
			continue
		}
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			return err
		}
		if err := plainParents(dir, rel); err != nil {
			return &Error{Code: agentwire.CodeRefused, Err: err}
		}
		os.Remove(link)
		if err := os.Symlink(filepath.Join(final, secretFile(e)), link); err != nil {
			return err
		}
	}
	return nil
}

// wipeSecrets removes the repo's secrets, and the links into them from
// the copy; incoming too says whether secrets still arriving go as well.
func (c *Config) wipeSecrets(k string, incomingToo bool) {
	final := c.SecretsDir(k)
	r, _ := c.readRecord(k)
	if r != nil {
		for _, e := range r.Secrets {
			if rel, ok := secretRepoPath(e); ok {
				link := filepath.Join(r.Dir, filepath.FromSlash(rel))
				if t, err := os.Readlink(link); err == nil && strings.HasPrefix(t, final+string(filepath.Separator)) {
					os.Remove(link)
				}
			}
		}
	}
	os.RemoveAll(final)
	if incomingToo {
		os.RemoveAll(final + ".incoming")
	}
}

// SendMessage hands a message, or BACK, read from r to the repo's running
// session through the inbox.
func (c *Config) SendMessage(o agentwire.SendRequest, r io.Reader) (*agentwire.MessageResult, error) {
	if err := checkKey(o.Repo); err != nil {
		return nil, err
	}
	body, err := io.ReadAll(io.LimitReader(r, handover.Max+1))
	if err != nil {
		return nil, err
	}
	if len(body) > handover.Max {
		return nil, usagef("the message is over %d KiB", handover.Max>>10)
	}
	if !o.Back && strings.TrimSpace(string(body)) == "" {
		return nil, usagef("an empty message: give its text on stdin")
	}
	resp, err := c.call(Request{Op: "send", Repo: o.Repo, Body: string(body), Back: o.Back, Interrupt: o.Interrupt})
	if err != nil {
		return nil, err
	}
	return &agentwire.MessageResult{OK: true, Seq: resp.Seq, Delivery: resp.Delivery}, nil
}
