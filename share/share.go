// Package share is connection sharing (docs/architecture.md "Connection
// sharing"), both ends, after OpenSSH's ControlMaster auto and
// ControlPersist: the first invocation dials the endpoint itself and
// starts a control master (Start, Master), a background process holding
// one connection to the endpoint and serving it on a unix socket; the
// invocations that follow reach the endpoint through that socket
// (Sharing.Connect), paying no TCP, TLS or HTTP/2 set-up of their own.
// The master holds no token: each call carries its caller's, as without
// it. box.Dial uses the client's side (box.WithSharing, Sharing.Connect)
// and makes the master's connection (box.DialUpstream); this package
// imports no package of ours above internal/, so what needs box's
// internals (its dial options, its connection) stays in box/share.go.
package share

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/cocoonbox/cocoonbox/internal/flock"
)

// Sharing is the settings of connection sharing for box.Dial
// (box.WithSharing).
type Sharing struct {
	// Dir is the directory of the control sockets and their lock files;
	// Connect makes it 0700 and refuses one that another user owns or others
	// may enter.
	Dir string
	// Key is whatever besides the endpoint changes how it is reached or
	// trusted (the configuration directory, keepalive settings, the
	// system's roots), so that a master is shared only by callers that
	// would have dialed alike.
	Key string
	// Start starts a control master in the background for the endpoint
	// url (its CA file caFile, "" for the system's roots), serving sock.
	// lock is the master's lock, held exclusively: the
	// master must inherit it (and keep it open for its life) so that no
	// second one starts. Start must not wait for the master.
	Start func(url, caFile, sock string, lock *os.File) error
	// MinRTT is the shortest round trip of a master's link for which
	// box.Dial goes through the master: on a nearer link (a box on this
	// machine or the LAN) the extra hop costs more CPU per byte than the
	// round trips it saves (docs/benchmarks.md). 0 always goes through.
	MinRTT time.Duration
	// Log, if not empty, is a file to which the client appends one line
	// saying whether it went through a master or dialed itself (for tests).
	Log string
}

// ControlSocket is the control socket of the master of the endpoint url
// (its CA file caFile, "" for none) under dir, for callers that share key
// (Sharing.Key): dir/E-K.sock, where E is 16 hex digits of a hash of url
// and K 12 of one of the CA file (name and contents) and key.
func ControlSocket(dir, url, caFile, key string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", caFile, key)
	if caFile != "" {
		if b, err := os.ReadFile(caFile); err == nil {
			h.Write(b)
		}
	}
	return filepath.Join(dir, endpointHash(url)+"-"+hex.EncodeToString(h.Sum(nil))[:12]+".sock")
}

func endpointHash(url string) string {
	s := sha256.Sum256([]byte(url))
	return hex.EncodeToString(s[:])[:16]
}

// Stop removes the control sockets of the masters of the endpoint url
// under dir, whatever their key: each master sees its socket gone and
// exits within a few seconds, and new calls dial directly.
func Stop(dir, url string) {
	socks, _ := filepath.Glob(filepath.Join(dir, endpointHash(url)+"-*.sock"))
	for _, s := range socks {
		os.Remove(s)
	}
}

// maxSocketPath is the longest unix socket path every platform takes
// (sun_path is 104 bytes on macOS, 108 on Linux, with its NUL).
const maxSocketPath = 103

// sockName is as long as the name ControlSocket gives.
const sockName = "0123456789abcdef-0123456789ab.sock"

// FirstShortDir is the first of dirs in which ControlSocket's paths fit a
// unix socket's address on every platform (103 bytes), or an error when
// none is short enough.
func FirstShortDir(dirs []string) (string, error) {
	for _, d := range dirs {
		if len(d)+1+len(sockName) <= maxSocketPath {
			return d, nil
		}
	}
	return "", errors.New("no directory for control sockets is short enough")
}

// ControlDir checks, or makes, a 0700 directory of the caller's own for
// control sockets, in a directory of the caller's that only it may write.
// The directory above is checked before dir is made in it: it may be
// /tmp/cocoonbox-UID, which another user can take first (a link there
// would have dir made wherever it leads).
func ControlDir(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return err
	}
	// Nor may another user rename it away under us.
	up, err := os.Lstat(filepath.Dir(dir))
	if err != nil {
		return err
	}
	if !up.IsDir() || up.Mode().Perm()&0o022 != 0 || !ownedByMe(up) {
		return fmt.Errorf("%s is not a directory of this user's that only it may write; remove it", filepath.Dir(dir))
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() || fi.Mode().Perm()&0o077 != 0 || !ownedByMe(fi) {
		return fmt.Errorf("%s is not a 0700 directory of this user's; remove it", dir)
	}
	return nil
}

// ClientConn is a gRPC connection its client closes: the endpoint's own
// (*grpc.ClientConn) or one through a master.
type ClientConn interface {
	grpc.ClientConnInterface
	io.Closer
}

// Connect is box.Dial's connection to the endpoint url, reached at the
// gRPC target, with its CA file caFile (find's arguments). Through a
// live master of the endpoint when it passes its check (CheckMethod) and
// its link is not nearer than s.MinRTT: then calls go through the master
// until it is gone, and to direct(false)'s connection after (masterConn).
// Otherwise it is direct's connection, with near true when the master's
// link was measured nearer than MinRTT (the direct connection then takes
// a local hop's windows). opts are box.Dial's options for a connection to
// a master: windows, buffers and per-call credentials. The errors are
// direct's, or a bad opts's.
func (s *Sharing) Connect(target, url, caFile string, opts []grpc.DialOption, direct func(near bool) (*grpc.ClientConn, error)) (ClientConn, error) {
	near := false
	if d := s.find(target, url, caFile); d != nil {
		master, err := d.client(opts)
		if err != nil {
			return nil, fmt.Errorf("endpoint %s: %w", url, err)
		}
		switch rtt, err := check(master); {
		case err != nil:
			s.logf("direct; the master failed its check: %v", status.Convert(err).Message())
			master.Close()
		case rtt > 0 && rtt < s.MinRTT:
			s.logf("direct; the master's round trip %v is below %v", rtt, s.MinRTT)
			master.Close()
			near = true
		default:
			return newMasterConn(master, func() (*grpc.ClientConn, error) { return direct(false) }), nil
		}
	}
	conn, err := direct(near)
	if err != nil {
		return nil, err
	}
	return conn, nil
}

// find is where Connect connects for the endpoint url, reached at the
// gRPC target (a unix:// one is never shared: reaching it costs no round
// trip), with its CA file caFile: a live master's socket, with an opened
// connection to it; nil means dial the endpoint, having started a master
// (s.Start) for the calls that follow when none was starting.
func (s *Sharing) find(target, url, caFile string) *dialer {
	if !sharingSupported || strings.HasPrefix(target, "unix://") {
		return nil
	}
	if ControlDir(s.Dir) != nil {
		return nil
	}
	sock := ControlSocket(s.Dir, url, caFile, s.Key)
	if c, err := dialMaster(sock); err == nil {
		s.logf("via master %s", sock)
		d := &dialer{sock: sock}
		d.first.Store(&c)
		return d
	}
	lockPath := strings.TrimSuffix(sock, ".sock") + ".lock"
	lock, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil
	}
	defer lock.Close()
	if flock.Lock(lock, flock.Exclusive|flock.NoWait) != nil {
		// A master is starting, or is about to go.
		s.logf("direct; a master holds %s", lockPath)
		return nil
	}
	if err := s.Start(url, caFile, sock, lock); err != nil {
		s.logf("direct; no master: %v", err)
		return nil
	}
	s.logf("direct; started a master for %s", sock)
	return nil
}

// dialMaster connects to the socket sock if it is this user's and a
// process of this user listens there.
func dialMaster(sock string) (net.Conn, error) {
	fi, err := os.Lstat(sock)
	if err != nil {
		return nil, err
	}
	if fi.Mode().Type() != os.ModeSocket || !ownedByMe(fi) {
		return nil, fmt.Errorf("%s is not a socket of this user's", sock)
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		return nil, err
	}
	if err := peerIsMe(c); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// logf appends one line, "client PID: " and format's, to s.Log, if any.
func (s *Sharing) logf(format string, args ...any) {
	logLine(s.Log, "client %d: "+format, append([]any{os.Getpid()}, args...)...)
}

// logLine appends one line to file, the log of clients and masters
// alike (COCOONBOX_CONTROL_LOG), unless file is empty.
func logLine(file, format string, args ...any) {
	if file == "" {
		return
	}
	f, err := os.OpenFile(file, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return
	}
	fmt.Fprintf(f, format+"\n", args...)
	f.Close()
}

// dialer connects gRPC to a master's socket: first the connection find
// opened, then new ones.
type dialer struct {
	sock  string
	first atomic.Pointer[net.Conn]
}

func (d *dialer) dialSocket(ctx context.Context, _ string) (net.Conn, error) {
	if c := d.first.Swap(nil); c != nil {
		return *c, nil
	}
	return dialMaster(d.sock)
}

// masterConn sends each call through the master until a call cannot be
// opened there for want of a connection to it; then it, and every later
// call, goes to the endpoint directly. A call that was opened on the
// master's connection is never sent again: it may have run. It is safe
// for concurrent use; make one with newMasterConn.
type masterConn struct {
	master *grpc.ClientConn
	direct func() (*grpc.ClientConn, error)

	mu       sync.Mutex
	fallback *grpc.ClientConn
}

// newMasterConn is a masterConn over master (dialer.client's, checked
// with check) that falls back on the connection direct makes, once, when
// its first call cannot be opened there; direct's error is that call's.
func newMasterConn(master *grpc.ClientConn, direct func() (*grpc.ClientConn, error)) *masterConn {
	return &masterConn{master: master, direct: direct}
}

func (s *masterConn) pick() (grpc.ClientConnInterface, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fallback != nil {
		return s.fallback, false
	}
	return s.master, true
}

func (s *masterConn) giveUp() (grpc.ClientConnInterface, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fallback == nil {
		cc, err := s.direct()
		if err != nil {
			return nil, err
		}
		s.fallback = cc
	}
	return s.fallback, nil
}

var unaryDesc = &grpc.StreamDesc{}

// Invoke is gRPC's own unary call (grpc.ClientConn.Invoke) made on
// NewStream, so that a call is known to have been opened or not.
func (s *masterConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	st, err := s.NewStream(ctx, unaryDesc, method, opts...)
	if err != nil {
		return err
	}
	if err := st.SendMsg(args); err != nil {
		return err
	}
	return st.RecvMsg(reply)
}

// NewStream opens the call through the master, else directly. gRPC's
// NewStream fails only before the call is sent: it picks a connection
// (failing at once when none can be made) and queues the headers; what
// goes wrong later comes out of the stream's RecvMsg. A call that waits
// for its connection (grpc.WaitForReady, a resumable session's attach
// after a loss) waits only on the direct one: on the master's it fails at
// once, so that a master that is gone (it ends with its connection) is
// left for the direct one.
func (s *masterConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cc, viaMaster := s.pick()
	var st grpc.ClientStream
	var err error
	if viaMaster {
		st, err = cc.NewStream(ctx, desc, method, failFast(opts)...)
	} else {
		st, err = cc.NewStream(ctx, desc, method, opts...)
	}
	if viaMaster && status.Code(err) == codes.Unavailable {
		if cc, err = s.giveUp(); err != nil {
			return nil, err
		}
		return cc.NewStream(ctx, desc, method, opts...)
	}
	return st, err
}

// failFast is opts without a wait for the connection to be ready.
func failFast(opts []grpc.CallOption) []grpc.CallOption {
	out := make([]grpc.CallOption, 0, len(opts))
	for _, o := range opts {
		if _, ok := o.(grpc.FailFastCallOption); !ok {
			out = append(out, o)
		}
	}
	return out
}

// Close closes the connection to the master and the direct one, if made;
// calls in flight fail.
func (s *masterConn) Close() error {
	err := s.master.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fallback != nil {
		err = errors.Join(err, s.fallback.Close())
	}
	return err
}

// client makes the gRPC connection to a master over its socket, with opts
// (box.Dial's windows, buffers and per-call credentials): h2c, since the
// socket is this user's alone. It fails only on bad opts; the socket is
// reached on the first call.
func (d *dialer) client(opts []grpc.DialOption) (*grpc.ClientConn, error) {
	opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithContextDialer(d.dialSocket))
	return grpc.NewClient("passthrough:///cocoonbox-control-master", opts...)
}

var _ ClientConn = (*masterConn)(nil)

// CheckMethod is the one call a control master answers itself, never
// passing it on: Connect makes it (check) before using a master, with
// an empty request and reply (google.protobuf.Empty). The master answers at once
// when its connection carried something in the last few seconds, and
// otherwise first asks the endpoint (a gRPC health check, which any
// answer, even Unimplemented, proves alive); a connection that does not
// answer in time (a changed network, a NAT that forgot it) fails the check
// and ends the master, and the caller dials the endpoint itself, having
// sent nothing through the master. The reply (google.protobuf.Duration)
// is the round trip of the master's connection, zero while it is not yet
// measured: Connect goes direct when it is below Sharing.MinRTT.
const CheckMethod = "/cocoonbox.share.v1.Master/Check"

// checkTimeout bounds the client's check of a master: the master's own
// wait for the endpoint (probeTimeout, 3 s) and a margin.
const checkTimeout = 5 * time.Second

// check makes the CheckMethod call on a master's connection (dialer.client)
// and returns the round trip of the master's link (0 if not yet known),
// in at most 5 s; an error (UNAVAILABLE from a master whose link did not
// answer, or the deadline's) means the master is not to be used.
func check(master *grpc.ClientConn) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	rtt := &durationpb.Duration{}
	if err := master.Invoke(ctx, CheckMethod, &emptypb.Empty{}, rtt); err != nil {
		return 0, err
	}
	return rtt.AsDuration(), nil
}

// reasonLinkTimedOut is the ErrorInfo reason with which a control master
// passes on that its connection timed out, the error's text in its
// metadata under "error": the master's client is the one that saw it.
const reasonLinkTimedOut = "LINK_TIMED_OUT"

// WithLinkTimedOut is err, a call's error on the master's connection,
// with timedOut (the timed-out read or write the connection failed for;
// nil when it did not) attached when err is UNAVAILABLE, so that the
// master's clients name a frozen link as a direct client does
// (LinkTimedOut reads it).
func WithLinkTimedOut(err, timedOut error) error {
	st, ok := status.FromError(err)
	if timedOut == nil || !ok || st.Code() != codes.Unavailable {
		return err
	}
	if with, werr := st.WithDetails(&errdetails.ErrorInfo{Reason: reasonLinkTimedOut, Metadata: map[string]string{"error": timedOut.Error()}}); werr == nil {
		return with.Err()
	}
	return err
}

// LinkTimedOut is the text of the timed-out read or write a master's
// connection failed for, if st, a call's status through the master,
// carries it (WithLinkTimedOut).
func LinkTimedOut(st *status.Status) (string, bool) {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == reasonLinkTimedOut {
			return info.GetMetadata()["error"], true
		}
	}
	return "", false
}
