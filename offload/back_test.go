package offload

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/cocoonbox/cocoonbox/agentwire"
)

// scriptedAgent is the box half as waitBack sees it, over a fake clock
// that each long poll advances by its wait: the session posts back after
// postAt, and hooks fire after a BACK only when hookOnPaste. The box's
// clock is the laptop's plus boxAhead.
type scriptedAgent struct {
	now         time.Time
	entries     []agentwire.Entry
	postAt      time.Time // zero: never
	delivery    string
	hookAt      time.Time // zero: no hook yet
	hookOnPaste bool
	boxAhead    time.Duration
	calls       []string
}

func (a *scriptedAgent) Read(_ context.Context, _ string, since int64, wait time.Duration) (*agentwire.ReadResult, error) {
	a.calls = append(a.calls, "read")
	if !a.postAt.IsZero() && a.now.Add(wait).After(a.postAt) {
		if a.now.Before(a.postAt) {
			a.now = a.postAt
		}
		a.entries = append(a.entries, agentwire.Entry{Seq: len(a.entries) + 1, Kind: "back", OffloadID: testID, Body: "# Hand-over: done"})
		a.postAt = time.Time{}
	} else {
		a.now = a.now.Add(wait)
	}
	var out []agentwire.Entry
	for _, e := range a.entries {
		if int64(e.Seq) > since {
			out = append(out, e)
		}
	}
	return &agentwire.ReadResult{Entries: out, Status: "working"}, nil
}

func (a *scriptedAgent) SendBack(_ context.Context, _ string, interrupt bool) (*agentwire.MessageResult, error) {
	if interrupt {
		a.calls = append(a.calls, "back --interrupt")
	} else {
		a.calls = append(a.calls, "back")
	}
	if a.hookOnPaste {
		a.hookAt = a.now
	}
	return &agentwire.MessageResult{Seq: 1, Delivery: a.delivery}, nil
}

func (a *scriptedAgent) Status(context.Context, string) ([]agentwire.Session, error) {
	a.calls = append(a.calls, "status")
	hook := int64(0)
	if !a.hookAt.IsZero() {
		hook = a.hookAt.Add(a.boxAhead).UnixMilli()
	}
	return []agentwire.Session{{Repo: "k", OffloadID: testID, Status: "working", HookAtMS: hook}}, nil
}

// BackStart is the box's one Exec as its verbs one by one, a back entry
// of the offload in the outbox standing for its S' in the copy.
func (a *scriptedAgent) BackStart(ctx context.Context, key, id, path string, wait time.Duration, _ *BundleAsk) (*BackStart, error) {
	return verbByVerb(ctx, a, key, id, wait)
}

// The bundle comes when the back has, by the end.
func verbByVerb(ctx context.Context, a backAgent, key, id string, wait time.Duration) (*BackStart, error) {
	rd, err := a.Read(ctx, key, 0, 0)
	if err != nil {
		return nil, err
	}
	bs := &BackStart{Outbox: rd}
	since := int64(0)
	for _, e := range rd.Entries {
		since = max(since, int64(e.Seq))
		if e.Kind == "back" && e.OffloadID == id {
			bs.Bundle = true
			return bs, nil
		}
	}
	if bs.Sessions, err = a.Status(ctx, key); err != nil {
		return nil, err
	}
	if bs.Message, err = a.SendBack(ctx, key, false); err != nil {
		return nil, err
	}
	bs.Sent = true
	if rd.Fault != nil {
		// The box skips the wait for a session with a fault (BackStart).
		return bs, nil
	}
	if bs.Read, err = a.Read(ctx, key, since, wait); err != nil {
		return nil, err
	}
	for _, e := range bs.Read.Entries {
		bs.Bundle = bs.Bundle || e.Kind == "back" && e.OffloadID == id
	}
	return bs, nil
}

func TestWaitBack(t *testing.T) {
	t0 := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		agent      scriptedAgent
		wantCalls  []string
		wantResent bool
		wantErr    bool
		// wantBundled: the back came in the first Exec, with the bundle.
		wantBundled bool
	}{
		{
			name:        "the outbox holds the back already",
			agent:       scriptedAgent{entries: []agentwire.Entry{{Seq: 1, Kind: "progress", OffloadID: testID}, {Seq: 2, Kind: "back", OffloadID: testID}}},
			wantCalls:   []string{"read"},
			wantBundled: true,
		},
		{
			name:        "a back of another offload does not count",
			agent:       scriptedAgent{entries: []agentwire.Entry{{Seq: 1, Kind: "back", OffloadID: "old"}}, delivery: "pasted", hookOnPaste: true, postAt: t0.Add(10 * time.Second)},
			wantCalls:   []string{"read", "status", "back", "read"},
			wantBundled: true,
		},
		{
			name:       "a pasted BACK that draws no hook is sent again with --interrupt, once",
			agent:      scriptedAgent{delivery: "pasted", postAt: t0.Add(90 * time.Second)},
			wantCalls:  []string{"read", "status", "back", "read", "status", "back --interrupt", "read"},
			wantResent: true,
		},
		{
			name:      "a pasted BACK that drew a hook is not sent again",
			agent:     scriptedAgent{delivery: "pasted", hookOnPaste: true, postAt: t0.Add(90 * time.Second)},
			wantCalls: []string{"read", "status", "back", "read", "status", "read"},
		},
		{
			name:      "a hook drawn on a box clock an hour behind counts",
			agent:     scriptedAgent{delivery: "pasted", hookOnPaste: true, boxAhead: -time.Hour, postAt: t0.Add(90 * time.Second)},
			wantCalls: []string{"read", "status", "back", "read", "status", "read"},
		},
		{
			name:       "an earlier hook on a box clock an hour ahead is no answer to BACK",
			agent:      scriptedAgent{delivery: "pasted", hookAt: t0.Add(-5 * time.Second), boxAhead: time.Hour, postAt: t0.Add(90 * time.Second)},
			wantCalls:  []string{"read", "status", "back", "read", "status", "back --interrupt", "read"},
			wantResent: true,
		},
		{
			// The first wait, in the Exec that sends BACK, is ResendAfter
			// long whichever way BACK went.
			name:      "a queued BACK is never sent again",
			agent:     scriptedAgent{delivery: "queued", postAt: t0.Add(300 * time.Second)},
			wantCalls: []string{"read", "status", "back", "read", "read"},
		},
		{
			name:      "no back in 600 s",
			agent:     scriptedAgent{delivery: "queued"},
			wantCalls: []string{"read", "status", "back", "read", "read"},
			wantErr:   true,
		},
		{
			name:       "no back in 600 s after the resend",
			agent:      scriptedAgent{delivery: "pasted"},
			wantCalls:  []string{"read", "status", "back", "read", "status", "back --interrupt", "read"},
			wantResent: true,
			wantErr:    true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.agent
			a.now = t0
			b := &Backer{Laptop: Laptop{Now: func() time.Time { return a.now }}}
			res := &BackResult{}
			e, bundled, err := b.waitBack(context.Background(), &a, &Record{ID: testID, Repo: "k"}, res, nil)
			if tc.wantErr {
				var oe *Error
				if !errors.As(err, &oe) || oe.Code != ExitFailed || len(oe.Next) == 0 {
					t.Fatalf("got %v, want a failure with a next step", err)
				}
				if got := a.now.Sub(t0); got != BackTimeout {
					t.Errorf("gave up after %v, want %v", got, BackTimeout)
				}
			} else if err != nil || e == nil || e.Kind != "back" || e.OffloadID != testID {
				t.Fatalf("got %+v, %v", e, err)
			}
			if diff := cmp.Diff(tc.wantCalls, a.calls); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			if res.Resent != tc.wantResent {
				t.Errorf("resent %v, want %v", res.Resent, tc.wantResent)
			}
			if (bundled != nil) != tc.wantBundled {
				t.Errorf("bundled %v, want %v: the bundle counts only when the back came with it", bundled != nil, tc.wantBundled)
			}
		})
	}
}

// stoppingAgent is a box half whose long poll is cut short by a Ctrl-C:
// the poll cancels the context and fails as box.Client's exec does then.
type stoppingAgent struct {
	scriptedAgent
	cancel context.CancelFunc
}

func (a *stoppingAgent) Read(ctx context.Context, key string, since int64, wait time.Duration) (*agentwire.ReadResult, error) {
	if wait == 0 {
		return a.scriptedAgent.Read(ctx, key, since, wait)
	}
	a.cancel()
	return nil, errors.New("exec in main: " + ctx.Err().Error())
}

func (a *stoppingAgent) BackStart(ctx context.Context, key, id, path string, wait time.Duration, _ *BundleAsk) (*BackStart, error) {
	return verbByVerb(ctx, a, key, id, wait)
}

func TestWaitBackStopped(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := &stoppingAgent{scriptedAgent: scriptedAgent{delivery: "queued"}, cancel: cancel}
	var notices []string
	b := &Backer{Laptop: Laptop{Now: func() time.Time { return a.now }, Notice: func(l string) { notices = append(notices, l) }}}
	_, _, err := b.waitBack(ctx, a, &Record{ID: testID, Repo: "k"}, &BackResult{}, nil)
	var oe *Error
	if !errors.As(err, &oe) || !errors.Is(oe.Err, ErrWaitStopped) || len(oe.Next) != 1 || !hasCommand(oe.Next[0], cmdBack) || !hasCommand(oe.Next[0], cmdAbandon) {
		t.Fatalf("got %#v, want ErrWaitStopped with back and abandon next", err)
	}
	if len(notices) != 1 || !strings.Contains(notices[0], "600 s") || !strings.Contains(notices[0], "Ctrl-C") {
		t.Fatalf("notices %q, want one naming 600 s and Ctrl-C", notices)
	}
	if !strings.Contains(oe.Err.Error(), "nothing changed") {
		t.Errorf("%q does not say nothing changed", oe.Err)
	}
}

// TestHaves: the haves are the branches, the offload's S and HEAD, a
// detached HEAD's commit too, which no branch names (read from HEAD's
// file, not by a git of its own).
func TestHaves(t *testing.T) {
	env := testEnv(t)
	r := newRepo(t, env, map[string]string{"a": "a\n"})
	ctx := context.Background()
	first := strings.TrimSpace(run(t, r.Top, env, "git", "rev-parse", "HEAD"))
	run(t, r.Top, env, "git", "update-ref", RefOffload+"id1", first)
	run(t, r.Top, env, "git", "commit", "-q", "--allow-empty", "-m", "second")
	second := strings.TrimSpace(run(t, r.Top, env, "git", "rev-parse", "HEAD"))
	got, err := r.haves(ctx, "id1")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got, first) || !slices.Contains(got, second) {
		t.Errorf("haves %v, want %s (S) and %s (the branch)", got, first, second)
	}
	run(t, r.Top, env, "git", "checkout", "-q", "--detach")
	run(t, r.Top, env, "git", "commit", "-q", "--allow-empty", "-m", "detached")
	detached := strings.TrimSpace(run(t, r.Top, env, "git", "rev-parse", "HEAD"))
	if got, err = r.haves(ctx, "id1"); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got, detached) {
		t.Errorf("haves %v, want the detached HEAD %s", got, detached)
	}
}
