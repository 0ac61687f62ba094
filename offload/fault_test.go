package offload

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/agentwire"
)

// faultAgent is a box half whose session has a fault: before (in the
// first read) and after BACK (each later read; the fault's outbox entry
// ends the first of them at once), with the status then.
type faultAgent struct {
	scriptedAgent
	before, after *agentwire.Fault
	afterStatus   string
	reads         int
	// retrySince, when set, makes every read's fault the CLI's retries
	// since then.
	retrySince time.Time
}

func (a *faultAgent) Read(ctx context.Context, key string, since int64, wait time.Duration) (*agentwire.ReadResult, error) {
	a.reads++
	if a.reads == 2 && (a.after != nil || a.afterStatus != "") {
		wait = 0
	}
	rd, err := a.scriptedAgent.Read(ctx, key, since, wait)
	if !a.retrySince.IsZero() {
		rd.Fault = &agentwire.Fault{Kind: agentwire.FaultRetrying, Line: "Unable to connect to API (ConnectionRefused)", AgeMS: a.now.Sub(a.retrySince).Milliseconds()}
		return rd, err
	}
	if a.reads == 1 {
		rd.Fault = a.before
		return rd, err
	}
	rd.Fault = a.after
	if a.afterStatus != "" {
		rd.Status = a.afterStatus
	}
	return rd, err
}

func (a *faultAgent) BackStart(ctx context.Context, key, id, _ string, wait time.Duration, _ *BundleAsk) (*BackStart, error) {
	return verbByVerb(ctx, a, key, id, wait)
}

func TestWaitBackFault(t *testing.T) {
	t0 := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	refused := "API Error: Unable to connect to API (ConnectionRefused)"
	for _, tt := range []struct {
		name          string
		before, after *agentwire.Fault
		afterStatus   string
		postAt        time.Duration // 0: never
		retryFrom     time.Duration // retrying since t0+retryFrom; 0: not
		waited        time.Duration // how long back waits; 0: 5 s at most
		want          string        // the error, "" for none
		wantNext      []string
		notice        string
	}{
		{name: "BACK's turn failed", after: &agentwire.Fault{Kind: agentwire.FaultTurn, Line: refused, Turn: 1},
			want:     "the box CLI's BACK turn failed: " + refused,
			wantNext: []string{"box main in /w/app", "/offload/k/offload.json", "cocoonbox rsh -t main tmux attach -t cb-off-k-claude (detach with Ctrl-b d)", "cocoonbox back", "cocoonbox offload abandon"}},
		{name: "an earlier turn failed", before: &agentwire.Fault{Kind: agentwire.FaultTurn, Line: refused, Turn: 0, AgeMS: 40_000},
			after: &agentwire.Fault{Kind: agentwire.FaultTurn, Line: refused, Turn: 0}, postAt: 10 * time.Second,
			notice: "the box CLI's last turn failed 40 s ago: " + refused + "; BACK may fail the same way"},
		{name: "retrying before BACK", before: &agentwire.Fault{Kind: agentwire.FaultRetrying, Line: "API error", AgeMS: 20_000},
			postAt: 10 * time.Second, notice: "the box CLI is retrying for 20 s: API error; back waits until its retries last 60 s"},
		{name: "retrying past the bound before BACK", retryFrom: -70 * time.Second,
			want:     "the box CLI cannot reach its model: retrying for 70 s: Unable to connect to API (ConnectionRefused)",
			wantNext: []string{"cocoonbox rsh -t main tmux attach", "cocoonbox back", "cocoonbox offload abandon"}},
		{name: "retries reach the bound while back waits", retryFrom: -20 * time.Second, waited: 40 * time.Second,
			want: "the box CLI cannot reach its model: retrying for 60 s: Unable to connect to API (ConnectionRefused)"},
		{name: "stalled before BACK", before: &agentwire.Fault{Kind: agentwire.FaultStalled, Line: "Connection failed: error sending request", AgeMS: 5000},
			want: "the box CLI cannot take BACK (stalled 5 s ago): Connection failed: error sending request"},
		{name: "exited while back waited", after: &agentwire.Fault{Kind: agentwire.FaultExited, Line: "Killed"}, afterStatus: "stopped",
			want:     "the box CLI exited before it posted its back: Killed",
			wantNext: []string{"cocoonbox rsh -t main tmux attach", "cocoonbox offload restart", "cocoonbox offload abandon"}},
		{name: "stopped while back waited", afterStatus: "stopped", want: "the box CLI session of this offload stopped before it posted its back"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := &faultAgent{scriptedAgent: scriptedAgent{now: t0, delivery: "pasted"}, before: tt.before, after: tt.after, afterStatus: tt.afterStatus}
			if tt.postAt != 0 {
				a.postAt = t0.Add(tt.postAt)
			}
			if tt.retryFrom != 0 {
				a.retrySince = t0.Add(tt.retryFrom)
			}
			var notices []string
			b := &Backer{Laptop: Laptop{Store: Store{Dir: "/offload"}, Now: func() time.Time { return a.now }, Notice: func(l string) { notices = append(notices, l) }}}
			rec := &Record{ID: testID, Repo: "k", BoxName: "main", Dir: "/w/app", Kind: "claude"}
			start := a.now
			e, _, err := b.waitBack(context.Background(), a, rec, &BackResult{}, nil)
			if tt.want == "" {
				if err != nil || e == nil || e.Kind != "back" {
					t.Fatalf("got %v, %v; want the back entry", e, err)
				}
			} else {
				var oe *Error
				if !errors.As(err, &oe) || oe.Code != ExitFailed || oe.Err.Error() != tt.want {
					t.Fatalf("got %v, want exit 1 %q", err, tt.want)
				}
				if d := a.now.Sub(start); tt.waited == 0 && d > 5*time.Second || tt.waited != 0 && (d < tt.waited || d > tt.waited+time.Second) {
					t.Errorf("back waited %v (want %v)", d, tt.waited)
				}
				var next []string
				for _, s := range oe.Next {
					next = append(next, s.Text(testRender))
				}
				all := strings.Join(next, "\n")
				for _, w := range tt.wantNext {
					if !strings.Contains(all, w) {
						t.Errorf("next steps lack %q:\n%s", w, all)
					}
				}
			}
			if tt.notice != "" && !strings.Contains(strings.Join(notices, "\n"), tt.notice) {
				t.Errorf("notices %q lack %q", notices, tt.notice)
			}
		})
	}
}

// testRender spells a command as the cli package does, for the tests'
// eyes only.
func testRender(c Command) string {
	w := []string{map[Verb]string{VerbBack: "cocoonbox back", VerbAbandon: "cocoonbox offload abandon", VerbRestart: "cocoonbox offload restart", VerbRsh: "cocoonbox rsh"}[c.Verb]}
	if c.Terminal {
		w = append(w, "-t")
	}
	if c.Box != "" {
		w = append(w, c.Box)
	}
	return strings.Join(append(w, c.Args...), " ")
}
