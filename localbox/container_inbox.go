package localbox

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/cocoonbox/cocoonbox/boxexec"
	controlv1 "github.com/cocoonbox/cocoonbox/proto/cocoonbox/control/v1"
)

// A container box's offload inbox runs as the box user. Where the box's
// exec server is connected, the local box starts the inbox through it and
// holds it as it holds a command: its exit (killed, crashed) is known at
// once, and the box's next command starts it again, as under the process
// engine; its output comes through a pipe to boxes/NAME/inbox.log, as
// there. A box without a connected exec server (a container made before
// it, a server being revived) gets its inbox through the engine's API
// (inboxScript), which nothing watches: a start then looks again at most
// every inboxEvery, an exec each time.

// inboxServeScript becomes the inbox (exec), unless the one the pid file
// names still runs (one the API path started, or one that outlived its
// exec server): then it exits inboxElsewhere.
const inboxServeScript = `cd
pf=/run/cocoonbox/inbox.pid
[ -f "$pf" ] && kill -0 "$(cat "$pf")" 2>/dev/null && exit 3
echo $$ >"$pf"
exec cocoonbox-agent offload serve`

// inboxElsewhere is inboxServeScript's exit code when an inbox it did
// not start runs.
const inboxElsewhere = 3

// inboxScript starts the offload inbox (cocoonbox-agent offload serve) in
// the box unless the one its pid file names still runs, and waits up to
// 5 s for its socket, as the process engine's startInbox does: a call
// right after a wake finds it. Its output goes to /run/cocoonbox/inbox.log
// in the box; the inbox goes on after the exec (the container's init
// takes it).
const inboxScript = `cd
pf=/run/cocoonbox/inbox.pid
[ -f "$pf" ] && kill -0 "$(cat "$pf")" 2>/dev/null && exit 0
cocoonbox-agent offload serve </dev/null >>/run/cocoonbox/inbox.log 2>&1 &
echo $! >"$pf"
i=0
while [ ! -S /run/cocoonbox/cocoonbox/offload.sock ] && [ $i -lt 250 ] && kill -0 $! 2>/dev/null; do
	sleep 0.02
	i=$((i + 1))
done`

// inboxEvery is how often startInbox looks again at a box whose inbox it
// does not hold (started through the engine's API, or found running):
// such an inbox that died comes back with a command after it. It is also
// how long an inbox that exited at its start is left be, as inboxRetry.
const inboxEvery = 10 * time.Second

// inboxReady bounds startInbox's wait for an inbox it started through
// the exec server to listen.
const inboxReady = 5 * time.Second

// heldInbox is a box's inbox that its exec server started, until it exits.
type heldInbox struct {
	cmd *boxexec.Cmd
}

// startInbox makes sure box b's offload inbox runs: one it holds costs a
// map look-up; otherwise it starts one through the box's exec server, or
// through the engine's API at most every inboxEvery.
func (e *containerEngine) startInbox(b *box) {
	e.inboxMu.Lock()
	if e.inboxAt == nil {
		e.inboxAt = map[string]time.Time{}
		e.inboxHeld = map[string]*heldInbox{}
	}
	if e.inboxHeld[b.ID] != nil || time.Since(e.inboxAt[b.ID]) < inboxEvery {
		e.inboxMu.Unlock()
		return
	}
	e.inboxAt[b.ID] = time.Now()
	e.inboxMu.Unlock()
	if h := e.execHost(b, false); h != nil && h.Connected() {
		err := e.serveInbox(b, h)
		if err == nil {
			return
		}
		if !errors.Is(err, boxexec.ErrNoServer) {
			e.s.logf("box %s: inbox: %v", b.Name, err)
			return
		}
	}
	ctr, _, _ := e.names(b)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if _, err := e.runEnv(ctx, ctr, e.environ(b, &controlv1.Start{}), nil, inboxScript); err != nil {
		e.s.logf("box %s: inbox: %v", b.Name, err)
	}
}

// serveInbox starts box b's inbox through its exec server h, holds it
// (forgetting it when it exits, so that the next startInbox starts it
// again) and waits up to inboxReady for it to listen. An inbox that
// exits at once (one it did not start runs, or it failed) is not held:
// startInbox looks again after inboxEvery.
func (e *containerEngine) serveInbox(b *box, h *execHost) error {
	logf, err := openInboxLog(b.inboxLog())
	if err != nil {
		return err
	}
	child, ours, err := stdioPipes(2)
	if err != nil {
		logf.close()
		return err
	}
	// The inbox reads nothing: its stdin is at EOF.
	ours[0].Close()
	req := &boxexec.Request{Path: "/bin/sh", Args: []string{"sh", "-c", inboxServeScript}, Env: e.environ(b, &controlv1.Start{}), Dir: guestHome}
	cmd, err := h.Start(req, child[0], child[1], child[1])
	closeAll(child[:2])
	if err != nil {
		ours[1].Close()
		logf.close()
		return err
	}
	ready := make(chan struct{})
	var once bool
	logged := make(chan struct{})
	go func() {
		copyLog(logf, ours[1], func(line []byte) {
			if !once && bytes.Contains(line, []byte("inbox listening on ")) {
				once = true
				close(ready)
			}
		})
		ours[1].Close()
		close(logged)
	}()
	held := &heldInbox{cmd: cmd}
	e.inboxMu.Lock()
	e.inboxHeld[b.ID] = held
	e.inboxMu.Unlock()
	exited := make(chan struct{})
	go func() {
		ex := cmd.Wait()
		// The log pipe is left to its end (the inbox's, and whatever of it
		// holds the pipe), except after a clean exit: a process the inbox
		// started may hold it after, as under the process engine.
		if ex.Err == nil {
			select {
			case <-logged:
			case <-time.After(time.Second):
				ours[1].SetReadDeadline(time.Now())
			}
		}
		close(exited)
		e.inboxMu.Lock()
		defer e.inboxMu.Unlock()
		if e.inboxHeld[b.ID] != held {
			return
		}
		delete(e.inboxHeld, b.ID)
		switch {
		case ex.Err != nil:
			// The exec server went; the inbox may run on without it.
			e.inboxAt[b.ID] = time.Now()
		case ex.Code == inboxElsewhere:
		default:
			// Died after it listened: the next command starts another.
			// One that exited at its start is left be for inboxEvery.
			select {
			case <-ready:
				delete(e.inboxAt, b.ID)
			default:
			}
		}
	}()
	t := time.NewTimer(inboxReady)
	defer t.Stop()
	select {
	case <-ready:
		e.s.logf("box %s: inbox started (pid %d in the box)", b.Name, cmd.Pid())
	case <-exited:
		if ex := cmd.Wait(); ex.Err == nil && ex.Code != inboxElsewhere {
			e.s.logf("box %s: the inbox exited at start (%s); see %s", b.Name, ex, b.inboxLog())
		}
	case <-t.C:
	}
	return nil
}

// forgetInbox makes the next startInbox look at box b's inbox again: its
// container stopped or went, and the inbox with it.
func (e *containerEngine) forgetInbox(b *box) {
	e.inboxMu.Lock()
	delete(e.inboxAt, b.ID)
	delete(e.inboxHeld, b.ID)
	e.inboxMu.Unlock()
}
