package localbox_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/localbox"
)

// Idle hibernate: a box with no call for IdleHibernate is hibernated
// (saved first); a box with an Exec open stays up. The sentinel box,
// made after the Exec began, goes to sleep only once the busy box's own
// idle time has passed too, and a check of the busy box came first in the
// same pass (boxes are checked in name order): it must still run. A box
// without cocoonbox-agent has no offloaded session (a box whose agent does
// not answer stays up, as one whose session works).
func TestIdleHibernate(t *testing.T) {
	// No cocoonbox-agent: the box has no offloaded session to ask about.
	t.Setenv("PATH", "/usr/bin:/bin")
	_, base, tok := newServer(t, func(s *localbox.Server) {
		s.IdleHibernate = 300 * time.Millisecond
		s.IdleCheck = 20 * time.Millisecond
	})
	c := dial(t, base, tok)
	ctx := t.Context()
	if _, err := c.Create(ctx, "a-busy", ""); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	execCtx, stop := context.WithCancel(ctx)
	defer stop()
	go c.Exec(execCtx, &box.Command{Box: "a-busy", Line: "echo up; sleep 600", Stdin: strings.NewReader(""),
		Stdout: writerFunc(func(p []byte) (int, error) {
			select {
			case <-started:
			default:
				close(started)
			}
			return len(p), nil
		}), Stderr: io.Discard})
	<-started
	if _, err := c.Create(ctx, "z-sentinel", ""); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, "z-sentinel", "hibernated")
	if b, err := c.Status(ctx, "a-busy"); err != nil || b.State != "running" {
		t.Fatalf("a box with an Exec open: %+v, %v; want it running", b, err)
	}
	st, _ := c.Status(ctx, "z-sentinel")
	if st.LastSavedAtMS == 0 {
		t.Errorf("the idle box was not saved: %+v", st)
	}
	// The Exec ends: the busy box's clock starts then, and it sleeps too.
	stop()
	waitState(t, c, "a-busy", "hibernated")
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// waitState polls box name until it is in state want (the test's own
// deadline bounds it).
func waitState(t *testing.T, c *box.Client, name string, want box.State) {
	t.Helper()
	for {
		b, err := c.Status(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		if b.State == want {
			return
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("box %s: %s, never %s", name, b.State, want)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
