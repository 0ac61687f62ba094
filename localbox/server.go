// Package localbox is the local box server: the cocoonbox API served on this
// machine, with boxes as directories and commands as local processes. It is
// the target of the demo and of every end-to-end test, and a self-hosted
// option for a Linux server a team owns.
package localbox

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agnivade/levenshtein"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/cocoonbox/cocoonbox/internal/bufpool"
	"github.com/cocoonbox/cocoonbox/internal/printable"
	"github.com/cocoonbox/cocoonbox/internal/unixsock"
	"github.com/cocoonbox/cocoonbox/internal/window"
	"github.com/cocoonbox/cocoonbox/internal/wire"
	controlv1 "github.com/cocoonbox/cocoonbox/proto/cocoonbox/control/v1"
)

// DefaultBox is the box every local box has from its first start.
const DefaultBox = "main"

// Server serves the cocoonbox API for the boxes under Dir. Set the fields,
// then call Serve; a Server serves one listener at a time. Only one Server
// may use a Dir at a time: when it starts, it ends the process groups the
// records in Dir/procs name, as a previous one that died left them.
type Server struct {
	// Dir is the state directory: boxes/, tokens.json, the socket.
	Dir string
	// BinDir, if not empty, is put first on the PATH of every command, so
	// that cocoonbox-agent is found in the box.
	BinDir string
	// Logf, if not nil, receives one line per notable event.
	Logf func(format string, args ...any)
	// Serving, if not nil, is called once Serve has set up the boxes and
	// the engine, just before it serves: settings that worked may be
	// remembered then, and not by a start that fails.
	Serving func()
	// TLS, if not nil, holds the certificate: every connection to a TCP
	// listener is then TLS (LoadTLS, SelfSigned; docs/self-hosting.md).
	TLS *tls.Config
	// KeepaliveTime and KeepaliveTimeout replace wire's constants of
	// those names when not zero (gRPC raises either to at least 1 s).
	// The server's keepalive drops a client that does not answer, which
	// ends that client's commands (SIGHUP to each process group, SIGKILL
	// 2 s later): a dead or frozen client's commands so end within 47 s.
	KeepaliveTime, KeepaliveTimeout time.Duration
	// User, if not empty, is the account box commands and inboxes run as
	// (the server must be root to switch to it): the boxes' home,
	// workspace and run directories are given to it, and the state
	// directory must be reachable by it. Empty runs them as the server's
	// own user. OwnerUser chooses one for a server run by root.
	User string
	// AnonConns, AnonConnsPerSource and AnonIdle bound the anonymous
	// connections of a TCP listener, those on which no call has carried
	// a valid token yet (the sign-in pages' always are): at most
	// AnonConns in all and AnonConnsPerSource from one source (an IPv4
	// address or an IPv6 /64), another closed to make room for a new one
	// (of its source, or of the source that holds the most: one whose
	// peer has gone, else one that has sent nothing, else the one silent
	// longest), and each closed once it has sent nothing for AnonIdle. Zero
	// means DefaultAnonConns, DefaultAnonConnsPerSource, DefaultAnonIdle.
	// A unix socket's connections are not bounded (docs/self-hosting.md).
	AnonConns, AnonConnsPerSource int
	AnonIdle                      time.Duration
	// Engine is the engine boxes run on and its settings (engine.go); the
	// zero value is the process engine.
	Engine EngineSettings
	// IdleHibernate, if not zero, hibernates a running box once no
	// client call has held, begun or ended on it for that long and no
	// offloaded session in it is working (idle.go); IdleCheck is how
	// often that is looked at (zero: DefaultIdleCheck).
	IdleHibernate, IdleCheck time.Duration

	// homeScript, when not empty, is run in prepareScript's place: a
	// test's, to hold a start up.
	homeScript string

	// MaxStream, if not zero, is how long a call's stream may live: one
	// that old is reset both ways, as the hosted service's front end ends
	// each stream at an hour (docs/protocol.md), so the client sees
	// RST_STREAM and the call's command is ended as when its client goes.
	MaxStream time.Duration

	once  sync.Once
	err   error
	reg   *registry
	toks  *tokens
	owner *owner
	oauth *oauthServer
	grpc  *grpc.Server
	shell string
	path  string
	// boxUser is User's account, or nil.
	boxUser *boxUser
	// accts are the accounts other than the owner's; opened those whose
	// boxes are in the registry (acctMu guards it).
	accts   *accountSet
	acctMu  sync.Mutex
	opened  map[string]bool
	serving atomic.Bool
	eng     engine

	mu    sync.Mutex
	http  *http.Server // the sign-in pages, on a TCP listener
	port  int          // the TCP listener's port
	gate  *gate        // the TCP listener's anonymous connections
	inbox inboxes
	// idleStop ends the idle loop, when one runs.
	idleStop chan struct{}
}

// logf logs one line, escaped: a box names files, repositories and
// errors that reach it, and none may forge a line or a terminal sequence.
func (s *Server) logf(format string, args ...any) {
	if s.Logf != nil {
		s.Logf("%s", printable.Line(fmt.Sprintf(format, args...), 0))
	}
}

func (s *Server) init() error {
	s.once.Do(func() {
		if s.Dir == "" {
			s.err = errors.New("localbox: Server.Dir is empty")
			return
		}
		// Run by root, nothing is made before the way to it is checked.
		if err := mkdirPrivate(filepath.Join(s.Dir, "boxes"), 0o700); err != nil {
			s.err = err
			return
		}
		if s.User != "" {
			if s.boxUser, s.err = lookupBoxUser(s.User); s.err != nil {
				return
			}
			if s.err = s.checkReach(); s.err != nil {
				return
			}
		}
		s.reg = &registry{dir: s.Dir, images: &imageView{}}
		if err := s.reg.load(); err != nil {
			s.err = err
			return
		}
		if _, err := s.reg.create(DefaultBox); err != nil {
			s.err = err
			return
		}
		if s.eng, s.err = s.openEngine(); s.err != nil {
			return
		}
		homes := s.reg.list("")
		for _, b := range homes {
			if s.err = s.eng.boot(context.Background(), b); s.err != nil {
				return
			}
		}
		s.accts = &accountSet{dir: s.Dir, engine: s.eng.name()}
		if _, err := s.accts.load(); err != nil {
			s.err = err
			return
		}
		for _, name := range s.accts.names() {
			// An account that cannot be served (its user gone, a server
			// not run by root) leaves the others served: its calls say why.
			// Its homes are prepared below, with the owner's.
			if err := s.openAccountThen(name, func(bs []*box) { homes = append(homes, bs...) }); err != nil {
				s.logf("account %s: %v", name, err)
			}
		}
		// A box user may hold its helper up (SIGSTOP; it is the box
		// user's) until asUserTimeout: the start waits that long once,
		// not once a box.
		s.eng.prepare(homes)
		s.toks = &tokens{path: filepath.Join(s.Dir, "tokens.json")}
		if err := s.toks.load(); err != nil {
			s.err = fmt.Errorf("read tokens: %w", err)
			return
		}
		if s.owner, s.err = newOwner(s.Dir, s.logf); s.err != nil {
			s.err = fmt.Errorf("write the sign-in code: %w", s.err)
			return
		}
		s.oauth = newOAuthServer(s)
		s.shell = loginShell()
		s.path = os.Getenv("PATH")
		if s.BinDir != "" && !slices.Contains(filepath.SplitList(s.path), s.BinDir) {
			s.path = s.BinDir + string(os.PathListSeparator) + s.path
		}
		// Box commands get nothing of this process but their stdio: a
		// descriptor inherited from whoever started it would reach each.
		CloseInherited()
		s.cleanUp()
		kp := keepalive.ServerParameters{Time: wire.KeepaliveTime, Timeout: wire.KeepaliveTimeout}
		if s.KeepaliveTime > 0 {
			kp.Time = s.KeepaliveTime
		}
		if s.KeepaliveTimeout > 0 {
			kp.Timeout = s.KeepaliveTimeout
		}
		s.grpc = grpc.NewServer(
			grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
				MinTime:             10 * time.Second,
				PermitWithoutStream: true,
			}),
			grpc.KeepaliveParams(kp),
			experimental.BufferPool(bufpool.Shared),
			grpc.ForceServerCodecV2(bufpool.Codec{}),
			// Stop waits for the Exec handlers, which end their commands'
			// process groups: none may outlive the server.
			grpc.WaitForHandlers(true),
			grpc.ReadBufferSize(256<<10),
			grpc.WriteBufferSize(256<<10),
			grpc.InitialWindowSize(window.Stream),
			grpc.InitialConnWindowSize(window.Conn),
			grpc.Creds(gateCreds{maxStream: s.MaxStream}),
			// The HTTP/2 preface and SETTINGS, after a TLS handshake that
			// chose h2, within sniffTimeout, as the sniffer asks of the rest.
			grpc.ConnectionTimeout(sniffTimeout),
			grpc.InTapHandle(s.tapAuth),
			grpc.UnaryInterceptor(s.unaryAuth),
			grpc.StreamInterceptor(s.streamAuth),
		)
		controlv1.RegisterBoxesServer(s.grpc, &boxesService{s: s})
		controlv1.RegisterSessionServer(s.grpc, &sessionService{s: s})
		controlv1.RegisterAccountServer(s.grpc, &accountService{s: s})
	})
	return s.err
}

// Serve accepts connections on lis until Stop; it returns nil after Stop.
// On a TCP listener it serves the sign-in pages and the authorization
// server (docs/login.md) at the same address as the gRPC API: a
// connection that opens with the HTTP/2 preface goes to gRPC, any other to
// HTTP.
func (s *Server) Serve(lis net.Listener) error {
	if err := s.init(); err != nil {
		return err
	}
	s.logf("serving on %s", lis.Addr())
	var tc *tls.Config
	if s.TLS != nil {
		if len(s.TLS.Certificates) == 0 {
			return errNoCert
		}
		tc = serverTLS(s.TLS)
	}
	if a, ok := lis.Addr().(*net.TCPAddr); ok {
		g := newGate(cmp.Or(s.AnonConns, DefaultAnonConns), cmp.Or(s.AnonConnsPerSource, DefaultAnonConnsPerSource),
			cmp.Or(s.AnonIdle, DefaultAnonIdle), s.logf)
		m := newSniffer(lis, tc, g)
		hs := s.httpServer(s.oauth.handler())
		s.mu.Lock()
		s.http, s.port, s.gate = hs, a.Port, g
		s.mu.Unlock()
		go m.serve()
		go hs.Serve(m.http)
		lis = m.grpc
	} else {
		// A unix socket serves the control MCP beside gRPC, and no
		// sign-in pages: who can open the socket holds its token already.
		m := newSniffer(lis, nil, nil)
		mux := http.NewServeMux()
		mux.Handle(ControlMCPPath, s.mcpHandler())
		hs := s.httpServer(mux)
		s.mu.Lock()
		s.http = hs
		s.mu.Unlock()
		go m.serve()
		go hs.Serve(m.http)
		lis = m.grpc
	}
	s.serving.Store(true)
	if s.Serving != nil {
		s.Serving()
	}
	if s.IdleHibernate > 0 {
		s.mu.Lock()
		if s.idleStop == nil {
			s.idleStop = make(chan struct{})
			go s.idleLoop(s.idleStop)
		}
		s.mu.Unlock()
	}
	for _, b := range s.reg.all() {
		if b.proto().GetState() == controlv1.BoxState_BOX_STATE_RUNNING {
			s.startInbox(b)
		}
	}
	err := s.grpc.Serve(lis)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// httpServer serves h on the HTTP side of a listener.
func (s *Server) httpServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          log.New(io.Discard, "", 0),
		ConnContext:       withConn,
	}
}

// httpPort is the port of the TCP listener being served, or 0.
func (s *Server) httpPort() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.port
}

// Stop ends every call and closes the listener.
func (s *Server) Stop() {
	if s.init() == nil {
		s.grpc.Stop()
		s.mu.Lock()
		hs := s.http
		if s.idleStop != nil {
			close(s.idleStop)
			s.idleStop = nil
		}
		s.mu.Unlock()
		if hs != nil {
			hs.Close()
		}
		s.toks.flushes.Wait()
		s.powerOff()
		s.eng.shutdown()
	}
}

// CreateBox makes the owner's box name if it does not exist.
func (s *Server) CreateBox(name string) error {
	if err := s.init(); err != nil {
		return err
	}
	b, err := s.reg.create(name)
	if err == nil {
		err = s.eng.create(context.Background(), b)
	}
	if err == nil && s.grpc != nil {
		s.startInbox(b)
	}
	return err
}

// Listen opens the listener for addr: "" or "unix:PATH" for a unix socket
// (mode 0600; default DIR/localbox.sock), or "HOST:PORT" on a loopback
// address. Other addresses are refused: plaintext stays on this machine
// (ListenTLS serves any address).
func Listen(dir, addr string) (net.Listener, string, error) {
	if addr == "" || strings.HasPrefix(addr, "unix:") {
		p := strings.TrimPrefix(strings.TrimPrefix(addr, "unix:"), "//")
		if p == "" {
			p = SocketPath(dir)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return nil, "", err
		}
		if c, err := unixsock.Dial(p); err == nil {
			c.Close()
			return nil, "", fmt.Errorf("%s: a local box is already listening there", p)
		}
		os.Remove(p)
		lis, err := unixsock.Listen(p)
		if err != nil {
			return nil, "", err
		}
		if err := os.Chmod(p, 0o600); err != nil {
			lis.Close()
			return nil, "", err
		}
		return lis, "unix://" + p, nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, "", fmt.Errorf("listen address %q: want HOST:PORT or unix:PATH", addr)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, "", fmt.Errorf("listen address %q refused: plaintext only on loopback; for another address serve TLS: --tls self-signed, or --tls-cert FILE --tls-key FILE", addr)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	a := lis.Addr().(*net.TCPAddr)
	return lis, "http://" + net.JoinHostPort(a.IP.String(), fmt.Sprint(a.Port)), nil
}

// SocketPath is the default socket of the local box whose state is in dir.
func SocketPath(dir string) string { return filepath.Join(dir, "localbox.sock") }

type tokenKey struct{}

func (s *Server) authenticate(ctx context.Context) (context.Context, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	v := md.Get("authorization")
	if len(v) != 1 || !strings.HasPrefix(v[0], "Bearer ") {
		return nil, status.Error(codes.Unauthenticated, "no token: sign in with `cocoonbox login`")
	}
	rec, ok := s.toks.check(strings.TrimPrefix(v[0], "Bearer "))
	if !ok {
		return nil, status.Error(codes.Unauthenticated, "invalid bearer token")
	}
	if rec.Account != "" {
		if _, ok := s.accts.get(rec.Account); !ok {
			// Its account was removed; the token goes with it.
			return nil, status.Error(codes.Unauthenticated, "invalid bearer token")
		}
		if err := s.openAccount(rec.Account); err != nil {
			return nil, status.Errorf(codes.FailedPrecondition, "the boxes of account %s cannot be served: %v", rec.Account, err)
		}
	}
	markAuthenticated(ctx)
	return context.WithValue(ctx, tokenKey{}, rec), nil
}

// tapAuth refuses a call without a valid token as soon as its headers
// arrive, before gRPC reads any of its message: a unary call's request is
// read whole (up to 4 MiB) before the interceptors run, so without it a
// connection with no token could open stream after stream, each holding
// an unfinished request in the server's memory, which no connection cap
// bounds. authenticate checks the rest (the token's account) as before.
func (s *Server) tapAuth(ctx context.Context, info *tap.Info) (context.Context, error) {
	v := info.Header.Get("authorization")
	if len(v) != 1 || !strings.HasPrefix(v[0], "Bearer ") {
		return nil, status.Error(codes.Unauthenticated, "no token: sign in with `cocoonbox login`")
	}
	if _, ok := s.toks.check(strings.TrimPrefix(v[0], "Bearer ")); !ok {
		return nil, status.Error(codes.Unauthenticated, "invalid bearer token")
	}
	return ctx, nil
}

// revokedStatus is how a stream open on a token ends when it is revoked.
var revokedStatus = status.Error(codes.Unauthenticated, "the token was revoked")

func (s *Server) unaryAuth(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	ctx, err := s.authenticate(ctx)
	if err != nil {
		return nil, err
	}
	return h(ctx, req)
}

// authStream is a stream whose context ends when its token is revoked;
// from then on it sends nothing more.
type authStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (a authStream) Context() context.Context { return a.ctx }

func (a authStream) SendMsg(m any) error {
	if context.Cause(a.ctx) == errRevoked {
		return revokedStatus
	}
	return a.ServerStream.SendMsg(m)
}

// streamAuth checks the token and keeps the stream on the token's list of
// open calls, so that a revoke ends it with UNAUTHENTICATED.
func (s *Server) streamAuth(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	ctx, err := s.authenticate(ss.Context())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer s.toks.track(caller(ctx).ID, cancel)()
	err = h(srv, authStream{ss, ctx})
	if context.Cause(ctx) == errRevoked {
		return revokedStatus
	}
	return err
}

// lookup finds box ref of the caller's account: another account's box is
// not found, as one that does not exist.
func (s *Server) lookup(ctx context.Context, ref string) (*box, error) {
	b, ok := s.reg.get(caller(ctx).Account, ref)
	if !ok {
		if near := s.nearBox(caller(ctx).Account, ref); near != "" {
			return nil, status.Errorf(codes.NotFound, "no box %q; did you mean %s? list them with `cocoonbox boxes list`", ref, near)
		}
		return nil, status.Errorf(codes.NotFound, "no box %q; list them with `cocoonbox boxes list`", ref)
	}
	return b, nil
}

// nearBox is the name of account's box nearest to ref, a typo away (at
// most two edits, and at most half of ref's letters, in either case:
// MAIN is main), or "".
func (s *Server) nearBox(account, ref string) string {
	if len(ref) > 64 {
		return ""
	}
	ref = strings.ToLower(ref)
	best, bestD := "", 3
	for _, b := range s.reg.list(account) {
		if d := levenshtein.ComputeDistance(ref, b.Name); d < bestD && 2*d <= len(ref) {
			best, bestD = b.Name, d
		}
	}
	return best
}

func notRunning(b *box) error {
	st := status.Newf(codes.FailedPrecondition, "box %s is not running", b.Name)
	st, err := st.WithDetails(&errdetails.ErrorInfo{Reason: wire.ReasonNotRunning, Domain: wire.ErrorDomain})
	if err != nil {
		return status.Errorf(codes.FailedPrecondition, "box %s is not running", b.Name)
	}
	return st.Err()
}

type boxesService struct {
	controlv1.UnimplementedBoxesServer
	s *Server
}

func (x *boxesService) List(ctx context.Context, _ *controlv1.ListRequest) (*controlv1.ListResponse, error) {
	var r controlv1.ListResponse
	x.s.refreshImages(ctx)
	for _, b := range x.s.reg.list(caller(ctx).Account) {
		r.Boxes = append(r.Boxes, b.proto())
	}
	return &r, nil
}

// streamEmit sends each event on st; after a failed send it sends no more.
func streamEmit(st grpc.ServerStreamingServer[controlv1.OperationEvent]) emitFunc {
	var sendErr error
	return func(ev *controlv1.OperationEvent) error {
		if sendErr == nil {
			sendErr = st.Send(ev)
		}
		return sendErr
	}
}

func (x *boxesService) Ensure(req *controlv1.EnsureRequest, st grpc.ServerStreamingServer[controlv1.OperationEvent]) error {
	b, err := x.s.lookup(st.Context(), req.GetBox())
	if err != nil {
		return err
	}
	return x.s.ensureBox(b, streamEmit(st))
}

func (x *boxesService) Hibernate(ctx context.Context, req *controlv1.HibernateRequest) (*controlv1.HibernateResponse, error) {
	b, err := x.s.lookup(ctx, req.GetBox())
	if err != nil {
		return nil, err
	}
	var last *controlv1.OperationEvent
	x.s.hibernateBox(b, func(ev *controlv1.OperationEvent) error { last = ev; return nil })
	if last.GetOutcome() == controlv1.Outcome_OUTCOME_FAILED {
		return nil, status.Error(codes.Internal, last.GetError())
	}
	return &controlv1.HibernateResponse{Box: b.proto()}, nil
}

func (x *boxesService) Create(ctx context.Context, req *controlv1.CreateRequest) (*controlv1.CreateResponse, error) {
	b, _, err := x.s.createBox(caller(ctx).Account, req.GetName(), req.GetImage(), func(*controlv1.OperationEvent) error { return nil })
	if err != nil {
		return nil, err
	}
	// The box was made at once: no operation to follow.
	return &controlv1.CreateResponse{Box: b.proto()}, nil
}

func (x *boxesService) Delete(ctx context.Context, req *controlv1.DeleteRequest) (*controlv1.DeleteResponse, error) {
	if !req.GetConfirm() {
		return nil, status.Errorf(codes.InvalidArgument, "deleting box %s removes its home and workspace for good: confirm it", req.GetBox())
	}
	b, err := x.s.lookup(ctx, req.GetBox())
	if err != nil {
		return nil, err
	}
	if err := x.s.deleteBox(b); err != nil {
		return nil, status.Errorf(codes.Internal, "delete box %s: %v", b.Name, err)
	}
	return &controlv1.DeleteResponse{BoxId: b.ID}, nil
}

func (x *boxesService) Status(ctx context.Context, req *controlv1.StatusRequest) (*controlv1.StatusResponse, error) {
	b, err := x.s.lookup(ctx, req.GetBox())
	if err != nil {
		return nil, err
	}
	x.s.refreshImages(ctx)
	return &controlv1.StatusResponse{Box: b.proto()}, nil
}

func (x *boxesService) Save(req *controlv1.SaveRequest, st grpc.ServerStreamingServer[controlv1.OperationEvent]) error {
	b, err := x.s.lookup(st.Context(), req.GetBox())
	if err != nil {
		return err
	}
	return x.s.saveBox(b, streamEmit(st))
}

func (x *boxesService) Upgrade(req *controlv1.UpgradeRequest, st grpc.ServerStreamingServer[controlv1.OperationEvent]) error {
	if !req.GetConfirm() {
		return status.Errorf(codes.InvalidArgument, "upgrading box %s restarts what runs in it: confirm it", req.GetBox())
	}
	b, err := x.s.lookup(st.Context(), req.GetBox())
	if err != nil {
		return err
	}
	return x.s.upgradeBox(b, streamEmit(st))
}

func (x *boxesService) Usage(context.Context, *controlv1.UsageRequest) (*controlv1.UsageResponse, error) {
	return x.s.usage(), nil
}

// deleteBox takes b out of the registry, ends its commands, inbox and
// tmux, and removes its directory: its user's files as its user
// (removeBoxDir), then the local box's own.
func (s *Server) deleteBox(b *box) error {
	s.reg.remove(b)
	if err := s.eng.remove(context.Background(), b); err != nil {
		return err
	}
	s.logf("box %s of %s deleted", b.Name, accountLabel(b.account))
	return nil
}

// endBox ends what runs in box b, which has left the registry: its Execs
// (remove cancelled them), its inbox and its tmux server, and what its
// commands left running, in their process groups or out of them.
func (s *Server) endBox(b *box) {
	s.stopInbox(b)
	s.killTmux(b)
	s.sweepWhere(killDelay, b.ID)
	s.endBoxMarked(b, killDelay)
}

// accountLabel names account in the log: "" is the owner's.
func accountLabel(account string) string {
	if account == "" {
		return "the owner"
	}
	return "account " + account
}
