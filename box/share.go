package box

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
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
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/cocoonbox/cocoonbox/internal/bufpool"
	"github.com/cocoonbox/cocoonbox/internal/flock"
	"github.com/cocoonbox/cocoonbox/internal/window"
)

// Connection sharing (docs/architecture.md "Connection sharing"), after
// OpenSSH's ControlMaster auto and ControlPersist: the first invocation
// dials the endpoint itself and starts a control master, a background
// process holding one connection to the endpoint and serving it on a unix
// socket; the invocations that follow reach the endpoint through that
// socket, paying no TCP, TLS or HTTP/2 set-up of their own. The master
// holds no token: each call carries its caller's, as without it.

// Sharing turns on connection sharing for Dial (WithSharing).
type Sharing struct {
	// Dir is the directory of the control sockets and their lock files;
	// Dial makes it 0700 and refuses one that another user owns or others
	// may enter.
	Dir string
	// Key is whatever besides the endpoint changes how it is reached or
	// trusted (the configuration directory, keepalive settings, the
	// system's roots), so that a master is shared only by callers that
	// would have dialed alike.
	Key string
	// Start starts a control master in the background for the endpoint,
	// serving sock. lock is the master's lock, held exclusively: the
	// master must inherit it (and keep it open for its life) so that no
	// second one starts. Start must not wait for the master.
	Start func(ep Endpoint, sock string, lock *os.File) error
	// MinRTT is the shortest round trip of a master's link for which
	// Dial goes through the master: on a nearer link (a box on this
	// machine or the LAN) the extra hop costs more CPU per byte than the
	// round trips it saves (docs/benchmarks.md). 0 always goes through.
	MinRTT time.Duration
	// Log, if not empty, is a file to which Dial appends one line saying
	// whether it went through a master or dialed itself (for tests).
	Log string
}

// WithSharing makes Dial go through a live control master of the endpoint
// when there is one, and otherwise dial directly and start one (with
// s.Start) for the calls that follow. Unix socket endpoints are never
// shared: reaching them costs no round trip.
func WithSharing(s Sharing) DialOption {
	return func(o *dialOptions) { o.sharing = &s }
}

// WithIdleTimeout replaces gRPC's idle timeout (30 minutes), after which
// an unused connection is closed; 0 keeps it open. The control master
// uses it so that its connection lasts as long as it does.
func WithIdleTimeout(d time.Duration) DialOption {
	return func(o *dialOptions) { o.idleTimeout = &d }
}

// ControlSocket is the control socket of ep's master under dir, for
// callers that share key (Sharing.Key): dir/E-K.sock, where E is a hash of
// the endpoint URL and K one of its CA (name and contents) and key.
func ControlSocket(dir string, ep Endpoint, key string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", ep.CAFile, key)
	if ep.CAFile != "" {
		if b, err := os.ReadFile(ep.CAFile); err == nil {
			h.Write(b)
		}
	}
	return filepath.Join(dir, endpointHash(ep)+"-"+hex.EncodeToString(h.Sum(nil))[:12]+".sock")
}

func endpointHash(ep Endpoint) string {
	s := sha256.Sum256([]byte(ep.URL))
	return hex.EncodeToString(s[:])[:16]
}

// StopSharing removes the control sockets of ep's masters under dir,
// whatever their key: each master sees its socket gone and exits within
// a few seconds, and new calls dial directly.
func StopSharing(dir string, ep Endpoint) {
	socks, _ := filepath.Glob(filepath.Join(dir, endpointHash(ep)+"-*.sock"))
	for _, s := range socks {
		os.Remove(s)
	}
}

// ControlDir checks, or makes, a 0700 directory of the caller's own for
// control sockets, in a directory of the caller's that only it may write.
func ControlDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() || fi.Mode().Perm()&0o077 != 0 || !ownedByMe(fi) {
		return fmt.Errorf("%s is not a 0700 directory of this user's; remove it", dir)
	}
	// Nor may another user rename it away under us.
	up, err := os.Lstat(filepath.Dir(dir))
	if err != nil {
		return err
	}
	if !up.IsDir() || up.Mode().Perm()&0o022 != 0 || !ownedByMe(up) {
		return fmt.Errorf("%s is not a directory of this user's that only it may write; remove it", filepath.Dir(dir))
	}
	return nil
}

// viaMaster is where Dial connects: a live master's socket, with an
// opened connection to it; nil means dial the endpoint.
func viaMaster(ep Endpoint, s *Sharing) (*muxDialer, string) {
	if !sharingSupported || strings.HasPrefix(ep.Target, "unix://") {
		return nil, ""
	}
	if ControlDir(s.Dir) != nil {
		return nil, ""
	}
	sock := ControlSocket(s.Dir, ep, s.Key)
	if c, err := dialMaster(sock); err == nil {
		shareLog(s.Log, "via master %s", sock)
		d := &muxDialer{sock: sock}
		d.first.Store(&c)
		return d, sock
	}
	lockPath := strings.TrimSuffix(sock, ".sock") + ".lock"
	lock, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, sock
	}
	defer lock.Close()
	if flock.Lock(lock, flock.Exclusive|flock.NoWait) != nil {
		// A master is starting, or is about to go.
		shareLog(s.Log, "direct; a master holds %s", lockPath)
		return nil, sock
	}
	if err := s.Start(ep, sock, lock); err != nil {
		shareLog(s.Log, "direct; no master: %v", err)
		return nil, sock
	}
	shareLog(s.Log, "direct; started a master for %s", sock)
	return nil, sock
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

func shareLog(file, format string, args ...any) {
	if file == "" {
		return
	}
	f, err := os.OpenFile(file, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return
	}
	fmt.Fprintf(f, "client %d: "+format+"\n", append([]any{os.Getpid()}, args...)...)
	f.Close()
}

// muxDialer connects gRPC to a master's socket: first the connection
// viaMaster opened, then new ones.
type muxDialer struct {
	sock  string
	first atomic.Pointer[net.Conn]
}

func (d *muxDialer) dial(ctx context.Context, _ string) (net.Conn, error) {
	if c := d.first.Swap(nil); c != nil {
		return *c, nil
	}
	return dialMaster(d.sock)
}

// sharedConn sends each call through the master until a call cannot be
// opened there for want of a connection to it; then it, and every later
// call, goes to the endpoint directly. A call that was opened on the
// master's connection is never sent again: it may have run.
type sharedConn struct {
	mux    *grpc.ClientConn
	direct func() (*grpc.ClientConn, error)

	mu       sync.Mutex
	fallback *grpc.ClientConn
}

func (s *sharedConn) pick() (grpc.ClientConnInterface, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fallback != nil {
		return s.fallback, false
	}
	return s.mux, true
}

func (s *sharedConn) giveUp() (grpc.ClientConnInterface, error) {
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
func (s *sharedConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
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
// goes wrong later comes out of the stream's RecvMsg.
func (s *sharedConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cc, viaMux := s.pick()
	st, err := cc.NewStream(ctx, desc, method, opts...)
	if viaMux && status.Code(err) == codes.Unavailable {
		if cc, err = s.giveUp(); err != nil {
			return nil, err
		}
		return cc.NewStream(ctx, desc, method, opts...)
	}
	return st, err
}

func (s *sharedConn) Close() error {
	err := s.mux.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fallback != nil {
		err = errors.Join(err, s.fallback.Close())
	}
	return err
}

// dialMux makes the gRPC connection to a master over its socket: h2c,
// since the socket is this user's alone, with Dial's windows and buffers.
func dialMux(d *muxDialer, opts []grpc.DialOption) (*grpc.ClientConn, error) {
	opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithContextDialer(d.dial))
	return grpc.NewClient("passthrough:///cocoonbox-control-master", opts...)
}

// transportOptions are the options of every connection Dial makes;
// local is for a connection over a unix socket (window.LocalStream).
func transportOptions(local bool) []grpc.DialOption {
	stream, conn := int32(window.Stream), int32(window.Conn)
	if local {
		stream, conn = window.LocalStream, window.LocalConn
	}
	return []grpc.DialOption{
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage), grpc.ForceCodecV2(bufpool.Codec{})),
		grpc.WithUserAgent("cocoonbox-cli"),
		experimental.WithBufferPool(bufpool.Shared),
		grpc.WithReadBufferSize(ioBuffer),
		grpc.WithWriteBufferSize(ioBuffer),
		grpc.WithInitialWindowSize(stream),
		grpc.WithInitialConnWindowSize(conn),
	}
}

// Windows are the HTTP/2 flow-control windows Dial asks for on a unix
// socket (to a control master), per stream and per connection, and the
// size of its socket buffers, in bytes: what the control master's socket
// side must allow too, not to slow a stream down.
func Windows() (stream, conn int32, buffer int) {
	return window.LocalStream, window.LocalConn, ioBuffer
}

// Conn is the client's connection, for the control master, which sends
// calls it does not decode. It is nil for a client that goes through a
// master.
func (c *Client) Conn() *grpc.ClientConn { return c.raw }

var _ io.Closer = (*sharedConn)(nil)

// CheckMethod is the one call a control master answers itself, never
// passing it on: Dial makes it before using a master, with an empty
// request and reply (google.protobuf.Empty). The master answers at once
// when its connection carried something in the last few seconds, and
// otherwise first asks the endpoint (a gRPC health check, which any
// answer, even Unimplemented, proves alive); a connection that does not
// answer in time (a changed network, a NAT that forgot it) fails the check
// and ends the master, and the caller dials the endpoint itself, having
// sent nothing through the master. The reply (google.protobuf.Duration)
// is the round trip of the master's connection, zero while it is not yet
// measured: Dial goes direct when it is below Sharing.MinRTT.
const CheckMethod = "/cocoonbox.mux.v1.Master/Check"

// checkTimeout bounds Dial's check of a master: the master's own wait for
// the endpoint (mux.probeTimeout, 3 s) and a margin.
const checkTimeout = 5 * time.Second

// checkMaster makes the CheckMethod call on a master's connection and
// returns the round trip of the master's link (0 if not yet known).
func checkMaster(mux *grpc.ClientConn) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	rtt := &durationpb.Duration{}
	if err := mux.Invoke(ctx, CheckMethod, &emptypb.Empty{}, rtt); err != nil {
		return 0, err
	}
	return rtt.AsDuration(), nil
}

// reasonLinkTimedOut is the ErrorInfo reason with which a control master
// passes on that its connection timed out, the error's text in its
// metadata under "error": the master's client is the one that saw it.
const reasonLinkTimedOut = "LINK_TIMED_OUT"

// LinkError is err, a call's error on c's connection, with the timed-out
// read or write attached when the connection failed for that, so that
// the control master's clients name a frozen link as a direct client does.
func (c *Client) LinkError(err error) error {
	ie := c.ioErr.Load()
	st, ok := status.FromError(err)
	if ie == nil || !ok || st.Code() != codes.Unavailable {
		return err
	}
	if with, werr := st.WithDetails(&errdetails.ErrorInfo{Reason: reasonLinkTimedOut, Metadata: map[string]string{"error": (*ie).Error()}}); werr == nil {
		return with.Err()
	}
	return err
}

func linkTimedOut(st *status.Status) (string, bool) {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == reasonLinkTimedOut {
			return info.GetMetadata()["error"], true
		}
	}
	return "", false
}
