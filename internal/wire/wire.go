// Package wire holds the values of the control API that the client (box)
// and the local box server (localbox) must agree on and that the .proto
// files cannot say: an error reason and the keepalive's timing. Both
// import it; it imports nothing.
package wire

import "time"

// ReasonNotRunning is the google.rpc.ErrorInfo reason that comes, with
// FAILED_PRECONDITION, from an Exec on a box that is not running; the
// client then calls Boxes.Ensure and starts the command once more.
const ReasonNotRunning = "BOX_NOT_RUNNING"

// ErrorDomain is the google.rpc.ErrorInfo domain of ReasonNotRunning.
const ErrorDomain = "cocoonbox.dev"

// Keepalive timing (docs/protocol.md, Keepalive), the same both ways:
// after KeepaliveTime without a frame while a call is open a side pings,
// and when no answer comes KeepaliveTimeout later it drops the
// connection. A dead or frozen peer is so noticed within 45 s.
const (
	KeepaliveTime    = 30 * time.Second
	KeepaliveTimeout = 15 * time.Second
)
