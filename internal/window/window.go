// Package window holds the HTTP/2 flow-control windows of our gRPC
// connections, shared by the client (box/) and the local box (localbox/).
//
// A window is how many bytes a peer may send on a stream (or a connection)
// before the receiver has read them, so one stream moves at most
// Stream/RTT: 16 MiB carries 335 MB/s at 50 ms. The receiver buffers the
// window only while its reader lags, so memory stays bounded by it. A fixed
// window turns off gRPC's BDP estimation, which starts at 64 KiB and grows
// too slowly for a transfer of a few seconds (docs/benchmarks.md, "Window
// sizes at 50 ms").
package window

const (
	// Stream is the per-stream window, in bytes.
	Stream = 16 << 20
	// Conn is the per-connection window, in bytes: room for a few streams
	// at full speed at once (git's and rsync's commands run one or two).
	Conn = 64 << 20

	// LocalStream is the per-stream window, in bytes, of a hop over a
	// unix socket (a local box's, a control master's), whose round trip is
	// microseconds, or of a TCP path a control master measured shorter
	// than its sharing bound (box.Sharing.MinRTT, 2 ms by default: 4 MiB
	// carries 2 GB/s there): 4 MiB is more than one stream can use, and it
	// bounds what a receiver slower than its sender holds, so that the
	// client stays within about 35 MiB of RSS whatever the size of a
	// transfer (docs/benchmarks.md).
	LocalStream = 4 << 20
	// LocalConn is the per-connection window, in bytes, of such a hop.
	LocalConn = 16 << 20
)
