package offload

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/cocoonbox/cocoonbox/box"
)

// listingBox is a Client whose one box is in state, and whose Exec answers
// status with one session and rsync --version as a box's rsync 3.2.7,
// recording the lines it ran.
type listingBox struct {
	state box.State
	mu    sync.Mutex
	ran   []string
}

func (b *listingBox) List(context.Context) ([]box.Box, error) {
	return []box.Box{{ID: "b1", Name: "main", State: b.state, Image: "cbdesk:v22"}}, nil
}

func (b *listingBox) Exec(_ context.Context, cmd *box.Command) (box.ExitStatus, error) {
	b.mu.Lock()
	b.ran = append(b.ran, cmd.Line)
	b.mu.Unlock()
	io.WriteString(cmd.Stdout, `{"ok":true,"sessions":[{"repo":"k1","name":"app","copy":"mirror"}]}`+"\n\n"+answerMark+" 0\n")
	if strings.Contains(cmd.Line, "rsync --version") {
		io.WriteString(cmd.Stdout, "rsync  version 3.2.7  protocol version 31\nChecksum list:\n    xxh128 md5 none\n\n"+answerMark+" 0\n")
	}
	return box.ExitStatus{}, nil
}

// TestLookAhead: while the laptop preflight runs, offload asks for the box
// and, only when it is running, its sessions and its rsync's --version in
// one Exec (a status of a box that is not would wake it); begin then asks
// for them itself.
func TestLookAhead(t *testing.T) {
	for _, tt := range []struct {
		state        box.State
		before, want int // status Execs before sessions is asked, and in all
	}{
		{"running", 1, 1},
		{"hibernated", 0, 1},
	} {
		t.Run(string(tt.state), func(t *testing.T) {
			b := &listingBox{state: tt.state}
			o := &Offloader{Laptop: Laptop{Client: b}, Box: "main"}
			a := &Agent{Exec: b, Box: "main"}
			ctx := context.Background()
			l := o.lookAhead(ctx, a)
			defer l.stop()
			if bx, err := l.box(); err != nil || bx.ID != "b1" {
				t.Fatalf("box() = %+v, %v", bx, err)
			}
			if len(b.ran) != tt.before {
				t.Errorf("ran %q before begin asked, want %d status", b.ran, tt.before)
			}
			ss, rsync := l.sessions(ctx, a)
			if len(ss) != 1 || ss[0].Name != "app" || !strings.Contains(rsync, "xxh128") {
				t.Errorf("sessions() = %+v, %q", ss, rsync)
			}
			if len(b.ran) != tt.want || !strings.Contains(b.ran[0], "offload status") {
				t.Errorf("ran %q, want %d status in all", b.ran, tt.want)
			}
		})
	}
}
