package box

import (
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestUnreachableNamesNextStep: a refused connection names what to check,
// for a local box and for a box server elsewhere alike.
func TestUnreachableNamesNextStep(t *testing.T) {
	refused := status.Error(codes.Unavailable, "connection error: desc = \"transport: Error while dialing: dial tcp 192.0.2.7:7300: connect: connection refused\"")
	for url, want := range map[string]string{
		"https://192.0.2.7:7300": "is its box server up, and this endpoint right (COCOONBOX_ENDPOINT, cocoonbox login --endpoint)? else check the network and retry",
		"https://127.0.0.1:7300": "is the local box running? (cocoonbox localbox start --listen 127.0.0.1:7300 --tls self-signed",
		"unix:///tmp/x/box.sock": "is the local box running? (cocoonbox localbox start)",
	} {
		ep, err := ParseEndpoint(url)
		if err != nil {
			t.Fatal(err)
		}
		c := &Client{endpoint: ep, certErr: new(atomic.Pointer[CertError]), ioErr: new(atomic.Pointer[error])}
		got := c.wrap("exec in main", refused).Error()
		if !strings.Contains(got, "endpoint unreachable: "+url) || !strings.Contains(got, want) || strings.Contains(got, "\n") {
			t.Errorf("%s: %q, want one line with %q", url, got, want)
		}
	}
}
