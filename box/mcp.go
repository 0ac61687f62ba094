package box

import (
	"context"
	"net"
	"net/http"
	"strings"
)

// ControlMCPPath is where an endpoint serves the control MCP (seeds/001
// "Control MCP"), on the same address as the gRPC API.
const ControlMCPPath = "/cocoonbox.mcp/control"

// ControlMCP returns the URL of ep's control MCP and an HTTP client that
// reaches it, sending "Authorization: Bearer" with the token src returns
// at each request. A unix endpoint is reached over its socket (the URL's
// host is then a placeholder); an https one trusts what Dial trusts and
// offers only HTTP/1.1, since an endpoint gives HTTP/2 to gRPC.
func ControlMCP(ep Endpoint, src func() string) (string, *http.Client, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	url := ep.URL + ControlMCPPath
	switch {
	case strings.HasPrefix(ep.URL, "unix://"):
		path := strings.TrimPrefix(ep.URL, "unix://")
		var d net.Dialer
		t.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialContext(ctx, "unix", path) }
		url = "http://localbox" + ControlMCPPath
	case ep.TLS:
		tc, err := TLSConfig(ep)
		if err != nil {
			return "", nil, err
		}
		tc.NextProtos = []string{"http/1.1"}
		t.TLSClientConfig = tc
		t.ForceAttemptHTTP2 = false
	}
	return url, &http.Client{Transport: explainedTransport{bearerTransport{t, src}, ep}}, nil
}

// bearerTransport adds the token to each request.
type bearerTransport struct {
	rt  http.RoundTripper
	src func() string
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if tok := b.src(); tok != "" {
		r.Header.Set("Authorization", "Bearer "+tok)
	}
	return b.rt.RoundTrip(r)
}
