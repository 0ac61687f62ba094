// Package box is the client of the cocoonbox API: endpoint resolution,
// dialing, the Boxes calls, and Exec as plain io. It is the only client
// package that imports the generated gRPC code.
package box

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/cocoonbox/cocoonbox/internal/printable"
	"github.com/cocoonbox/cocoonbox/internal/unixsock"
	"github.com/cocoonbox/cocoonbox/internal/wire"
	controlv1 "github.com/cocoonbox/cocoonbox/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/share"
)

// Errors the client returns, wrapped with the server's message; match them
// with errors.Is.
var (
	// ErrUnauthenticated: the server refused the token, or none was given.
	ErrUnauthenticated = errors.New("not signed in")
	// ErrNotFound: no box, device or other object of that name.
	ErrNotFound = errors.New("not found")
	// ErrUnavailable: the endpoint could not be reached.
	ErrUnavailable = errors.New("endpoint unreachable")
	// ErrInvalidArgument: the server refused what the caller gave (a bad
	// box name): the error's text is the server's, as it says it.
	ErrInvalidArgument = errors.New("invalid argument")
)

// invalidArgument is an error whose text is the server's answer to an
// argument it refused, and which is ErrInvalidArgument.
type invalidArgument struct{ text string }

func (e invalidArgument) Error() string        { return e.text }
func (e invalidArgument) Is(target error) bool { return target == ErrInvalidArgument }

// Client talks to one endpoint. It is safe for concurrent use; the zero
// value is not usable: make one with Dial.
type Client struct {
	conn share.ClientConn
	// raw is the endpoint's own connection; nil through a master.
	raw      *grpc.ClientConn
	endpoint Endpoint
	signIn   string // the next step when the token is refused
	// unreachable, if not "", replaces UnreachableHint(endpoint).
	unreachable string
	boxes       controlv1.BoxesClient
	session     controlv1.SessionClient
	account     controlv1.AccountClient
	// certErr is the last refused server certificate, if any.
	certErr *atomic.Pointer[CertError]
	// ioErr is the current connection's timed-out read or write, if any.
	ioErr *atomic.Pointer[error]
	// linkTimeout is how long the kernel waits for an acknowledgement
	// before it gives up on the connection: the keepalive's timeout.
	linkTimeout time.Duration
	// resume, if not nil, makes Execs without a terminal resumable.
	resume *Resume
}

// DialOption changes how Dial connects.
type DialOption func(*dialOptions)

type dialOptions struct {
	keepaliveTime, keepaliveTimeout time.Duration
	signIn                          string
	unreachable                     string
	sharing                         *share.Sharing
	// noIdleTimeout keeps the connection open however long it is unused
	// (DialUpstream).
	noIdleTimeout bool
	tokenSource   func() string
	resume        *Resume
	// pathRTT, if not zero, is the path's measured round trip, which
	// sizes a direct connection's windows (WithPathRTT).
	pathRTT time.Duration
	// extra are more options of a direct connection (tests' interceptors).
	extra []grpc.DialOption
}

// reconnectBackoff paces the dials of a connection that resumable
// sessions wait on (Command.waitLink) while the link is down: the first
// at once, the next 10 ms after a failure, each gap 2% longer than the
// last (with gRPC's 20% jitter), at most a second. The gap is so about a
// fiftieth of how long the link has been down: a link that comes back is
// found on average within 1% of the outage's length (35 ms after 3 s,
// at most 0.5 s after a minute), and a dead network (each dial failing at
// once) costs some 50 dials in the first second, 5 a second after 10 s
// and one a second from the first minute on, never a busy loop.
var reconnectBackoff = backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.02, Jitter: 0.2, MaxDelay: time.Second}

// WithPathRTT sizes the windows of a direct connection to a path whose
// round trip was measured as rtt (window.ForRTT: larger than the default
// 16 MiB per stream from about 12 ms, at most 64 MiB), for a connection
// that lasts, as a control master's does (DialUpstream). Zero keeps the
// default windows.
func WithPathRTT(rtt time.Duration) DialOption {
	return func(o *dialOptions) { o.pathRTT = rtt }
}

// WithSignIn replaces the next step an UNAUTHENTICATED error names, "sign
// in with `cocoonbox login`", with hint: the caller knows better when the
// endpoint is a local box, where login may not be the way back in.
func WithSignIn(hint string) DialOption {
	return func(o *dialOptions) { o.signIn = hint }
}

// WithUnreachable replaces the next step an UNAVAILABLE error names,
// UnreachableHint's, with hint: the caller knows better when the endpoint
// is the one a local box it started last served at, where a plain
// `localbox start` serves it there again.
func WithUnreachable(hint string) DialOption {
	return func(o *dialOptions) { o.unreachable = hint }
}

// WithKeepalive replaces wire.KeepaliveTime and wire.KeepaliveTimeout: a ping after
// time of silence while a call is open, and failure timeout later. gRPC
// raises a time below 10 s to 10 s.
func WithKeepalive(time, timeout time.Duration) DialOption {
	return func(o *dialOptions) { o.keepaliveTime, o.keepaliveTimeout = time, timeout }
}

// WithTokenSource makes every call send the token src returns then,
// instead of Dial's: a long-lived client (cocoonbox-ssh --stdio under an
// OpenSSH ControlMaster) then picks up a token saved after it started.
// src is called once per call, concurrently; it should be cheap, and
// return the last good token when it cannot read a new one. Through a
// control master too, since the master holds no token.
func WithTokenSource(src func() string) DialOption {
	return func(o *dialOptions) { o.tokenSource = src }
}

// creds is the per-call credentials for token, or for do's token source.
func (do dialOptions) creds(token string) []grpc.DialOption {
	if do.tokenSource != nil {
		return []grpc.DialOption{grpc.WithPerRPCCredentials(bearerFunc(do.tokenSource))}
	}
	if token != "" {
		return []grpc.DialOption{grpc.WithPerRPCCredentials(bearer(token))}
	}
	return nil
}

// Dial makes a client for ep that sends token (which may be empty) with
// every call. The connection is made lazily by the first call; through a
// control master (WithSharing), Dial first checks the master
// (share.Sharing.Connect), and dials the endpoint itself if the check
// fails.
func Dial(ep Endpoint, token string, options ...DialOption) (*Client, error) {
	do := dialOptions{keepaliveTime: wire.KeepaliveTime, keepaliveTimeout: wire.KeepaliveTimeout, signIn: "sign in with `cocoonbox login`"}
	for _, f := range options {
		f(&do)
	}
	certErr, ioErr := new(atomic.Pointer[CertError]), new(atomic.Pointer[error])
	// direct dials the endpoint itself; near (a master measured the
	// path's round trip below Sharing.MinRTT) gives it the small windows
	// of a local hop, enough for that path (window.LocalStream).
	direct := func(near bool) (*grpc.ClientConn, error) { return dialDirect(ep, token, do, near, certErr, ioErr) }
	c := &Client{endpoint: ep, signIn: do.signIn, unreachable: do.unreachable, certErr: certErr, ioErr: ioErr, linkTimeout: do.keepaliveTimeout, resume: do.resume}
	var err error
	if do.sharing != nil {
		c.conn, err = do.sharing.Connect(ep.Target, ep.URL, ep.CAFile, append(transportOptions(true, 0), do.creds(token)...), direct)
	} else {
		c.conn, err = direct(false)
	}
	if err != nil {
		return nil, err
	}
	c.raw, _ = c.conn.(*grpc.ClientConn)
	c.boxes = controlv1.NewBoxesClient(c.conn)
	c.session = controlv1.NewSessionClient(c.conn)
	c.account = controlv1.NewAccountClient(c.conn)
	return c, nil
}

// dialDirect makes the connection to the endpoint itself.
func dialDirect(ep Endpoint, token string, do dialOptions, near bool, certErr *atomic.Pointer[CertError], ioErr *atomic.Pointer[error]) (*grpc.ClientConn, error) {
	var tc credentials.TransportCredentials
	if ep.TLS {
		cfg, err := TLSConfig(ep)
		if err != nil {
			return nil, err
		}
		tc = corkCreds{explainedCreds{credentials.NewTLS(cfg), ep, certErr}}
	} else {
		tc = insecure.NewCredentials()
	}
	opts := append(transportOptions(near || strings.HasPrefix(ep.Target, "unix:"), do.pathRTT),
		grpc.WithTransportCredentials(timeoutCreds{tc, ioErr}),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time:                do.keepaliveTime,
			Timeout:             do.keepaliveTimeout,
			PermitWithoutStream: false,
		}),
	)
	if do.noIdleTimeout {
		opts = append(opts, grpc.WithIdleTimeout(0))
	}
	if do.resume != nil {
		opts = append(opts, grpc.WithConnectParams(grpc.ConnectParams{Backoff: reconnectBackoff, MinConnectTimeout: 20 * time.Second}))
	}
	opts = append(opts, do.extra...)
	if p, ok := strings.CutPrefix(ep.Target, "unix://"); ok {
		// A socket deeper than an address holds (a deep state directory's
		// localbox.sock) is reached through a short link.
		opts = append(opts, grpc.WithContextDialer(func(context.Context, string) (net.Conn, error) { return unixsock.Dial(p) }))
	}
	opts = append(opts, do.creds(token)...)
	conn, err := grpc.NewClient(ep.Target, opts...)
	if err != nil {
		return nil, fmt.Errorf("endpoint %s: %w", ep.URL, err)
	}
	return conn, nil
}

// Close releases the connection; calls in flight fail.
func (c *Client) Close() error { return c.conn.Close() }

// Endpoint returns the endpoint the client talks to.
func (c *Client) Endpoint() Endpoint { return c.endpoint }

// bearer sends "authorization: Bearer <token>". Plaintext is allowed
// because ParseEndpoint admits it only to loopback and unix sockets.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (b bearer) RequireTransportSecurity() bool { return false }

// bearerFunc is bearer for the token a source returns at each call; an
// empty one sends none.
type bearerFunc func() string

func (f bearerFunc) GetRequestMetadata(ctx context.Context, uri ...string) (map[string]string, error) {
	if t := f(); t != "" {
		return bearer(t).GetRequestMetadata(ctx, uri...)
	}
	return nil, nil
}

func (bearerFunc) RequireTransportSecurity() bool { return false }

// State is a box's state as a lower-case word: absent, starting, running,
// hibernating, hibernated or failed.
type State string

// Box describes one box (boxes.proto Box).
type Box struct {
	ID            string
	Name          string
	State         State
	Image         string
	LatestImage   string
	LastSavedAtMS int64
	// UpgradeAvailable is true when Image is not LatestImage.
	UpgradeAvailable bool
}

func fromProto(b *controlv1.Box) Box {
	if b == nil {
		return Box{}
	}
	return Box{
		ID:            b.GetBoxId(),
		Name:          b.GetName(),
		State:         stateName(b.GetState()),
		Image:         b.GetImage(),
		LatestImage:   b.GetLatestImage(),
		LastSavedAtMS: b.GetLastSavedAtMs(),

		UpgradeAvailable: b.GetUpgradeAvailable(),
	}
}

func stateName(s controlv1.BoxState) State {
	n := strings.TrimPrefix(s.String(), "BOX_STATE_")
	return State(strings.ToLower(n))
}

// List returns the caller's boxes.
func (c *Client) List(ctx context.Context) ([]Box, error) {
	r, err := c.boxes.List(ctx, &controlv1.ListRequest{})
	if err != nil {
		return nil, c.wrap("list boxes", err)
	}
	var out []Box
	for _, b := range r.GetBoxes() {
		out = append(out, fromProto(b))
	}
	return out, nil
}

// Ensure brings box to running. progress, if not nil, gets one line per
// phase the server reports.
func (c *Client) Ensure(ctx context.Context, box string, progress io.Writer) (Box, error) {
	st, err := c.boxes.Ensure(ctx, &controlv1.EnsureRequest{Box: box})
	if err != nil {
		return Box{}, c.wrap("wake "+box, err)
	}
	r, err := c.follow(st, "wake "+box, box, progress)
	return r.Box, err
}

// OperationResult is how an operation ended.
type OperationResult struct {
	// Box is the box as the last event left it.
	Box Box
	// OperationID is "" when there was nothing to do.
	OperationID string
	// Bytes is the last total_bytes the operation reported (a save's size).
	Bytes int64
}

// PhaseName is an operation phase as a lower-case word ("waking",
// "restoring_files").
func PhaseName(p controlv1.Phase) string {
	return strings.ToLower(strings.TrimPrefix(p.String(), "PHASE_"))
}

// follow reads an operation's events to its end, writing one line per
// new phase to progress (if not nil).
func (c *Client) follow(st interface {
	Recv() (*controlv1.OperationEvent, error)
}, op, box string, progress io.Writer) (OperationResult, error) {
	var last controlv1.Phase
	var r OperationResult
	for {
		ev, err := st.Recv()
		if err == io.EOF {
			return OperationResult{}, fmt.Errorf("%s: the server ended the operation without a result", op)
		}
		if err != nil {
			return OperationResult{}, c.wrap(op, err)
		}
		if ev.GetTotalBytes() > 0 {
			r.Bytes = ev.GetTotalBytes()
		}
		if progress != nil && ev.GetPhase() != last && ev.GetOutcome() == controlv1.Outcome_OUTCOME_RUNNING {
			last = ev.GetPhase()
			fmt.Fprintf(progress, "box %s: %s...\n", printable.Line(box, maxEcho), PhaseName(last))
		}
		switch ev.GetOutcome() {
		case controlv1.Outcome_OUTCOME_DONE:
			r.Box, r.OperationID = fromProto(ev.GetBox()), ev.GetOperationId()
			return r, nil
		case controlv1.Outcome_OUTCOME_FAILED:
			return OperationResult{}, fmt.Errorf("%s: %s", op, printable.Line(ev.GetError(), 4*maxEcho))
		}
	}
}

// Status returns box as it stands, without waking it.
func (c *Client) Status(ctx context.Context, box string) (Box, error) {
	return c.StatusFor(ctx, box, "status of "+box)
}

// StatusFor is Status read as the first step of another verb, op (such
// as "sleep main"): its errors begin with op, since to the user it is the
// verb that failed.
func (c *Client) StatusFor(ctx context.Context, box, op string) (Box, error) {
	r, err := c.boxes.Status(ctx, &controlv1.StatusRequest{Box: box})
	if err != nil {
		return Box{}, c.wrap(op, err)
	}
	return fromProto(r.GetBox()), nil
}

// Save saves box; progress as Ensure's.
func (c *Client) Save(ctx context.Context, box string, progress io.Writer) (OperationResult, error) {
	st, err := c.boxes.Save(ctx, &controlv1.SaveRequest{Box: box})
	if err != nil {
		return OperationResult{}, c.wrap("save "+box, err)
	}
	return c.follow(st, "save "+box, box, progress)
}

// Upgrade moves box to its latest image, restarting what runs in it;
// progress as Ensure's.
func (c *Client) Upgrade(ctx context.Context, box string, progress io.Writer) (OperationResult, error) {
	st, err := c.boxes.Upgrade(ctx, &controlv1.UpgradeRequest{Box: box, Confirm: true})
	if err != nil {
		return OperationResult{}, c.wrap("upgrade "+box, err)
	}
	return c.follow(st, "upgrade "+box, box, progress)
}

// Usage is the account's model usage (boxes.proto UsageResponse).
type Usage struct {
	Today, Month, DailyCapMicros, RemainingTodayMicros int64
	DefaultCap                                         bool
	// Unmeasured names the fields the server cannot measure.
	Unmeasured []string
}

// Usage returns the account's model usage.
func (c *Client) Usage(ctx context.Context) (Usage, error) {
	r, err := c.boxes.Usage(ctx, &controlv1.UsageRequest{})
	if err != nil {
		return Usage{}, c.wrap("usage", err)
	}
	return Usage{Today: r.GetToday(), Month: r.GetMonth(), DailyCapMicros: r.GetDailyCapMicros(), DefaultCap: r.GetDefaultCap(),
		RemainingTodayMicros: r.GetRemainingTodayMicros(), Unmeasured: r.GetUnmeasured()}, nil
}

// Hibernate puts box to sleep.
func (c *Client) Hibernate(ctx context.Context, box string) (Box, error) {
	r, err := c.boxes.Hibernate(ctx, &controlv1.HibernateRequest{Box: box})
	if err != nil {
		return Box{}, c.wrap("hibernate "+box, err)
	}
	return fromProto(r.GetBox()), nil
}

// Create makes a new box named name on image ("" for the server's
// default) and returns it; a name the caller has already is an error
// (ALREADY_EXISTS) with the server's one line, a bad name or image
// ErrInvalidArgument.
func (c *Client) Create(ctx context.Context, name, image string) (Box, error) {
	r, err := c.boxes.Create(ctx, &controlv1.CreateRequest{Name: name, Image: image})
	if err != nil {
		return Box{}, c.wrap("create "+name, err)
	}
	return fromProto(r.GetBox()), nil
}

// Delete removes box and everything in it, ending its commands; it
// returns the deleted box's id. An unknown box wraps ErrNotFound.
func (c *Client) Delete(ctx context.Context, box string) (string, error) {
	r, err := c.boxes.Delete(ctx, &controlv1.DeleteRequest{Box: box, Confirm: true})
	if err != nil {
		return "", c.wrap("delete "+box, err)
	}
	return r.GetBoxId(), nil
}

// maxEcho is how many runes of a value given by the caller an error
// message repeats.
const maxEcho = 80

// wrap turns a gRPC error into one line that names what failed, wrapping the
// sentinel a caller may branch on.
func (c *Client) wrap(op string, err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	// op names what the caller gave (a box name, a device id) and msg is
	// the server's text: neither may drive the terminal or flood it.
	op = printable.Line(op, maxEcho)
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("%s: %w", op, err)
	}
	msg := printable.Line(st.Message(), 4*maxEcho)
	switch st.Code() {
	case codes.Unauthenticated, codes.PermissionDenied:
		return fmt.Errorf("%s: %w at %s: %s; %s", op, ErrUnauthenticated, c.endpoint.URL, msg, c.signIn)
	case codes.NotFound:
		return fmt.Errorf("%s: %w: %s", op, ErrNotFound, msg)
	case codes.Unavailable:
		if ce := c.certErr.Load(); ce != nil {
			return fmt.Errorf("%s: %w", op, ce)
		}
		why := ""
		if ie := c.ioErr.Load(); ie != nil {
			why = (*ie).Error()
		} else if w, ok := share.LinkTimedOut(st); ok {
			why = w
		}
		if why != "" {
			return fmt.Errorf("%s: %w: %s: %s; the link stopped answering for %s; check the network and retry", op, ErrUnavailable, c.endpoint.URL, printable.Line(why, 4*maxEcho), c.linkTimeout)
		}
		// A TLS server reading our plaintext preface closes (EOF) or,
		// with bytes unread, resets: either may be what we read.
		if strings.Contains(msg, "EOF") || strings.Contains(msg, "connection reset by peer") {
			if tls := PlainToTLS(c.endpoint); tls != "" {
				return fmt.Errorf("%s: %w: %s", op, ErrUnavailable, tls)
			}
		}
		hint := c.unreachable
		if hint == "" {
			hint = UnreachableHint(c.endpoint)
		}
		return fmt.Errorf("%s: %w: %s: %s; %s", op, ErrUnavailable, c.endpoint.URL, dialReason(msg), hint)
	case codes.DeadlineExceeded:
		return fmt.Errorf("%s: %s did not answer in time", op, c.endpoint.URL)
	case codes.Canceled:
		return fmt.Errorf("%s: %w", op, context.Canceled)
	}
	// The server's text names the problem and the next step; its gRPC
	// code would only add noise to that line.
	text := op + ": " + msg
	if st.Code() == codes.InvalidArgument {
		return invalidArgument{text}
	}
	return errors.New(text)
}

// wrapRunning is wrap for an Exec's stream lost once its command ran: the
// endpoint had answered, so a reset (UNAVAILABLE, or a front end's
// RST_STREAM) is a lost connection, not a box that may not be running.
// Without resumable sessions the box's command ended with it, and the
// line says what would have kept it.
func (c *Client) wrapRunning(op string, err error) error {
	st, ok := status.FromError(err)
	reset := ok && (st.Code() == codes.Unavailable || st.Code() == codes.Internal && strings.Contains(st.Message(), "RST_STREAM"))
	if !reset || c.certErr.Load() != nil || c.ioErr.Load() != nil {
		return c.wrap(op, err)
	}
	if _, ok := share.LinkTimedOut(st); ok {
		return c.wrap(op, err)
	}
	next := "; the command in the box ended with it (COCOONBOX_RESUME=on makes commands outlive a lost connection)"
	if c.resume != nil && !c.resume.Terminals {
		next = ""
	}
	return fmt.Errorf("%s: the connection to %s was lost while the command ran (%s)%s",
		printable.Line(op, maxEcho), c.endpoint.URL, printable.Line(dialReason(st.Message()), 4*maxEcho), next)
}

// dialReason trims gRPC's wrapping from a connection error, leaving the
// system's reason ("dial unix /x: connect: no such file or directory").
// UnreachableHint is the next step when ep does not answer: start the
// local box (with its --listen and TLS flags) where ep is one, else check
// the endpoint and the network. One clause, no leading separator.
func UnreachableHint(ep Endpoint) string {
	if strings.HasPrefix(ep.URL, "unix://") {
		return "is the local box running? (cocoonbox localbox start)"
	}
	if host, _, err := net.SplitHostPort(ep.Target); err == nil && isLoopback(host) {
		tls := ""
		if ep.TLS {
			tls = " --tls self-signed, or your --tls-cert and --tls-key"
		}
		return "is the local box running? (cocoonbox localbox start --listen " + ep.Target + tls + ")"
	}
	return "is its box server up, and this endpoint right (COCOONBOX_ENDPOINT, cocoonbox login --endpoint)? else check the network and retry"
}

func dialReason(msg string) string {
	if i := strings.Index(msg, "Error while dialing: "); i >= 0 {
		msg = strings.TrimSuffix(msg[i+len("Error while dialing: "):], `"`)
	}
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return msg
}

func notRunning(err error) bool {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.FailedPrecondition {
		return false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == wire.ReasonNotRunning {
			return true
		}
	}
	return false
}
