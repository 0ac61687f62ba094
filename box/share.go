package box

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/experimental"

	"github.com/cocoonbox/cocoonbox/internal/bufpool"
	"github.com/cocoonbox/cocoonbox/internal/window"
	"github.com/cocoonbox/cocoonbox/share"
)

// Connection sharing itself, both ends, is package share, which imports
// nothing of ours above internal/; what stays here needs box's own dial
// options and connection: the option that hands Dial to share's client
// side (WithSharing) and a master's own connection (DialUpstream).

// WithSharing makes Dial connect with s.Connect: through a live control
// master of the endpoint when there is one, and otherwise directly,
// starting one (with s.Start) for the calls that follow. Unix socket
// endpoints are never shared: reaching them costs no round trip.
func WithSharing(s share.Sharing) DialOption {
	return func(o *dialOptions) { o.sharing = &s }
}

// DialUpstream makes a control master's connection to ep
// (share.Master.Dial): Dial's, with options (keepalive) and no token,
// never through a master and never closed for idleness (gRPC's idle
// timeout would end it after 30 minutes, the master lasting longer), with
// the windows and socket buffers the master's socket side must allow
// (share.Upstream.Buffer), and the link's timed-out read or write named in
// its calls' errors. The connection is made lazily; its errors are Dial's.
func DialUpstream(ep Endpoint, options ...DialOption) (*share.Upstream, error) {
	c, err := Dial(ep, "", append(options, func(o *dialOptions) {
		o.sharing = nil
		o.noIdleTimeout = true
	})...)
	if err != nil {
		return nil, err
	}
	return &share.Upstream{Conn: c.raw, LinkError: c.linkError, Buffer: ioBuffer}, nil
}

// linkError is err, a call's error on c's connection, with the timed-out
// read or write attached when the connection failed for that
// (share.WithLinkTimedOut).
func (c *Client) linkError(err error) error {
	var ie error
	if p := c.ioErr.Load(); p != nil {
		ie = *p
	}
	return share.WithLinkTimedOut(err, ie)
}

// transportOptions are the options of every connection Dial makes;
// local is for a connection over a unix socket (window.LocalStream), and
// rtt, if not zero, a path's measured round trip that sizes the windows
// of any other (window.ForRTT).
func transportOptions(local bool, rtt time.Duration) []grpc.DialOption {
	stream, conn := int32(window.Stream), int32(window.Conn)
	switch {
	case local:
		stream, conn = window.LocalStream, window.LocalConn
	case rtt > 0:
		stream, conn = window.ForRTT(rtt)
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
