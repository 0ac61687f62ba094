package localbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	controlv1 "github.com/cocoonbox/cocoonbox/proto/cocoonbox/control/v1"
)

// The box operations, shared by the gRPC Boxes service and the control
// MCP (mcp.go). Each reports its steps to an emit func as
// OperationEvents, the last with outcome DONE or FAILED; emit's error
// (the caller has gone) stops the reports, not the operation.

// emitFunc receives one operation event.
type emitFunc func(*controlv1.OperationEvent) error

// newOperationID is "op_" and 16 hex digits.
func newOperationID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return "op_" + hex.EncodeToString(b)
}

// opEvent is an event of operation op on box b.
func opEvent(b *box, op string, phase controlv1.Phase, progress uint32, outcome controlv1.Outcome) *controlv1.OperationEvent {
	return &controlv1.OperationEvent{OperationId: op, Phase: phase, Progress: progress, Outcome: outcome, Box: b.proto()}
}

func runningEvent(op string, b *box, phase controlv1.Phase, progress uint32) *controlv1.OperationEvent {
	return opEvent(b, op, phase, progress, controlv1.Outcome_OUTCOME_RUNNING)
}

func done(op string, b *box) *controlv1.OperationEvent {
	return opEvent(b, op, controlv1.Phase_PHASE_DONE, 100, controlv1.Outcome_OUTCOME_DONE)
}

func failed(op string, b *box, err error) *controlv1.OperationEvent {
	ev := opEvent(b, op, controlv1.Phase_PHASE_FAILED, 100, controlv1.Outcome_OUTCOME_FAILED)
	ev.Error = err.Error()
	return ev
}

// ensureBox wakes b when it sleeps and starts its inbox. A box already
// running is one DONE event with an empty operation id.
func (s *Server) ensureBox(b *box, emit emitFunc) error {
	op := ""
	b.touch()
	if b.proto().GetState() != controlv1.BoxState_BOX_STATE_RUNNING {
		op = newOperationID()
		if err := emit(runningEvent(op, b, controlv1.Phase_PHASE_WAKING, 0)); err != nil {
			return err
		}
		if err := s.eng.start(context.Background(), b); err != nil {
			return emit(failed(op, b, err))
		}
		if err := b.setHibernated(false); err != nil {
			return emit(failed(op, b, err))
		}
		s.logf("box %s woken", b.Name)
	}
	s.startInbox(b)
	return emit(done(op, b))
}

// hibernateBox saves b and puts it to sleep: its Execs, inbox and
// processes end. A box already asleep is one DONE event with an empty
// operation id.
func (s *Server) hibernateBox(b *box, emit emitFunc) error {
	if b.proto().GetState() == controlv1.BoxState_BOX_STATE_HIBERNATED {
		return emit(done("", b))
	}
	op := newOperationID()
	if err := emit(runningEvent(op, b, controlv1.Phase_PHASE_SNAPSHOTTING, 0)); err != nil {
		return err
	}
	if err := b.setHibernated(true); err != nil {
		return emit(failed(op, b, fmt.Errorf("hibernate %s: %w", b.Name, err)))
	}
	if err := s.eng.stop(context.Background(), b); err != nil {
		return emit(failed(op, b, fmt.Errorf("hibernate %s: %w", b.Name, err)))
	}
	s.stopInbox(b)
	s.logf("box %s hibernated", b.Name)
	return emit(done(op, b))
}

// saveBox saves b. The process engine's box is its directory on this
// machine's disk, so nothing is copied: the save measures the box's
// files (home and workspace, the bytes a save of it holds) and records
// the time. A hibernated box was saved when it went to sleep: it is not
// woken, and the answer is one DONE event with an empty operation id.
func (s *Server) saveBox(b *box, emit emitFunc) error {
	if b.proto().GetState() == controlv1.BoxState_BOX_STATE_HIBERNATED {
		ev := done("", b)
		ev.TotalBytes = b.savedBytes()
		ev.DoneBytes = ev.TotalBytes
		return emit(ev)
	}
	op := newOperationID()
	if err := emit(runningEvent(op, b, controlv1.Phase_PHASE_SNAPSHOTTING, 0)); err != nil {
		return err
	}
	n, err := s.eng.measure(context.Background(), b)
	if err != nil {
		return emit(failed(op, b, fmt.Errorf("save %s: %w", b.Name, err)))
	}
	ev := runningEvent(op, b, controlv1.Phase_PHASE_SAVING, 50)
	ev.DoneBytes, ev.TotalBytes = n, n
	if err := emit(ev); err != nil {
		return err
	}
	b.mu.Lock()
	b.LastSavedAtMS = time.Now().UnixMilli()
	b.SavedBytes = n
	err = b.saveLocked()
	b.mu.Unlock()
	if err != nil {
		return emit(failed(op, b, fmt.Errorf("save %s: %w", b.Name, err)))
	}
	s.logf("box %s saved (%d bytes)", b.Name, n)
	ev = done(op, b)
	ev.DoneBytes, ev.TotalBytes = n, n
	return emit(ev)
}

func (b *box) savedBytes() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.SavedBytes
}

// measure adds up the sizes of the regular files under b's home and
// workspace. It reads the box user's tree through an os.Root of the
// box's directory, following no link.
func (b *box) measure() (int64, error) {
	r, err := os.OpenRoot(b.dir)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	var n int64
	for _, top := range []string{"home", "workspace"} {
		err := fs.WalkDir(r.FS(), top, func(_ string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil // a file that went away, or one the walk may not read
			}
			if d.Type().IsRegular() {
				if fi, err := d.Info(); err == nil {
					n += fi.Size()
				}
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
	}
	return n, nil
}

// upgradeBox moves b to the latest image (imageView), keeping its home
// and workspace, through the engine: what runs in it ends (its Execs,
// inbox, tmux and processes, or its container), and a running box gets
// its inbox back. A box on the latest image already is one DONE event
// with an empty operation id; a hibernated box stays asleep and wakes on
// the new image.
func (s *Server) upgradeBox(b *box, emit emitFunc) error {
	s.refreshImages(context.Background())
	if !b.proto().GetUpgradeAvailable() {
		return emit(done("", b))
	}
	op := newOperationID()
	if err := emit(runningEvent(op, b, controlv1.Phase_PHASE_SNAPSHOTTING, 0)); err != nil {
		return err
	}
	b.mu.Lock()
	b.cancelExecsLocked()
	b.mu.Unlock()
	s.stopInbox(b)
	if err := emit(runningEvent(op, b, controlv1.Phase_PHASE_RESTORING, 50)); err != nil {
		return err
	}
	from := b.proto().GetImage()
	if err := s.eng.upgrade(context.Background(), b); err != nil {
		return emit(failed(op, b, fmt.Errorf("upgrade %s: %w", b.Name, err)))
	}
	if b.proto().GetState() == controlv1.BoxState_BOX_STATE_RUNNING && s.serving.Load() {
		s.startInbox(b)
	}
	s.logf("box %s upgraded from %s to %s", b.Name, from, b.proto().GetImage())
	return emit(done(op, b))
}

// createBox makes account's box name on image ("" for LatestImage).
// The errors are gRPC statuses: INVALID_ARGUMENT for a bad name or an
// image not offered, ALREADY_EXISTS for a name the account has.
func (s *Server) createBox(account, name, image string, emit emitFunc) (*box, string, error) {
	if !ValidName(name) {
		return nil, "", status.Errorf(codes.InvalidArgument, "bad box name %q: use 1 to 63 of a-z, 0-9 and -, not starting with -", name)
	}
	offered, err := s.offeredImages()
	if err != nil {
		return nil, "", status.Errorf(codes.FailedPrecondition, "create box %s: %v", name, err)
	}
	if image == "" {
		image = offered[len(offered)-1]
	}
	if !slices.Contains(offered, image) {
		return nil, "", status.Errorf(codes.InvalidArgument, "no image %q here: the local box offers %s", image, strings.Join(offered, ", "))
	}
	if _, ok := s.reg.get(account, name); ok {
		return nil, "", status.Errorf(codes.AlreadyExists, "you have a box %s already; list them with `cocoonbox boxes list`", name)
	}
	op := newOperationID()
	emit(&controlv1.OperationEvent{OperationId: op, Phase: controlv1.Phase_PHASE_CREATING, Outcome: controlv1.Outcome_OUTCOME_RUNNING,
		Box: &controlv1.Box{Name: name, State: controlv1.BoxState_BOX_STATE_STARTING, Image: image, LatestImage: offered[len(offered)-1], UpgradeAvailable: image != offered[len(offered)-1]}})
	label := image
	if s.reg.images.isContainer() {
		label = LatestImage
	}
	b, created, err := s.reg.addImage(account, name, label)
	if err != nil {
		return nil, "", status.Errorf(codes.Internal, "create box %s: %v", name, err)
	}
	if !created {
		return nil, "", status.Errorf(codes.AlreadyExists, "you have a box %s already; list them with `cocoonbox boxes list`", name)
	}
	if s.reg.images.isContainer() {
		b.mu.Lock()
		b.EngineImage = image
		b.mu.Unlock()
	}
	if err := s.eng.create(context.Background(), b); err != nil {
		return nil, "", status.Errorf(codes.Internal, "create box %s: %v", name, err)
	}
	if s.serving.Load() {
		s.startInbox(b)
	}
	s.logf("box %s of %s created", b.Name, accountLabel(account))
	emit(done(op, b))
	return b, op, nil
}

// offeredImages are the images a new box may have, the latest last: the
// process engine's labels, or a container engine's latest box image.
func (s *Server) offeredImages() ([]string, error) {
	c, ok := s.eng.(*containerEngine)
	if !ok {
		return Images, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	img, err := c.latestImage(ctx)
	if err != nil {
		return nil, err
	}
	return []string{img}, nil
}

// deleteBoxOp is deleteBox as an operation.
func (s *Server) deleteBoxOp(b *box, emit emitFunc) error {
	op := newOperationID()
	emit(runningEvent(op, b, controlv1.Phase_PHASE_DELETING, 0))
	if err := s.deleteBox(b); err != nil {
		return emit(failed(op, b, fmt.Errorf("delete box %s: %w", b.Name, err)))
	}
	ev := done(op, b)
	ev.Box.State = controlv1.BoxState_BOX_STATE_ABSENT
	return emit(ev)
}

// usage is what the local box knows of model usage: nothing, since it
// meters no model calls (a box's programs reach their models directly).
// It says so in Unmeasured; it sets no cap.
func (s *Server) usage() *controlv1.UsageResponse {
	return &controlv1.UsageResponse{DefaultCap: true, Unmeasured: []string{"today", "month", "remaining_today_micros"}}
}
