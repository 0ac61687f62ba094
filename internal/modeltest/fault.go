package modeltest

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Fault is how the endpoint fails the CLIs' model requests, for tests of
// what a failed turn looks like: NoFault answers as scripted, Refuse
// refuses connections, and any other value is an HTTP status (500, 529,
// 401) answered with the vendor's own error body.
type Fault int

// The faults that are no HTTP status.
const (
	// NoFault: every request is answered as scripted.
	NoFault Fault = 0
	// Refuse: the listener is closed and open connections dropped, so
	// every connection is refused, as by a host where nothing listens.
	Refuse Fault = -1
)

// ParseFault reads a fault as tests name it: "none", "refuse", or an
// HTTP status from 400 to 599.
func ParseFault(s string) (Fault, error) {
	switch s {
	case "none":
		return NoFault, nil
	case "refuse":
		return Refuse, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 400 || n > 599 {
		return 0, fmt.Errorf("fault %q: want none, refuse or an HTTP status 400-599", s)
	}
	return Fault(n), nil
}

func (f Fault) String() string {
	switch f {
	case NoFault:
		return "none"
	case Refuse:
		return "refuse"
	}
	return strconv.Itoa(int(f))
}

// SetFault makes the endpoint fail from now on as f says, or serve again
// (NoFault), on the same port. Leaving Refuse listens on that port again
// and fails when another process took it meanwhile.
func (s *Server) SetFault(f Fault) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f == s.fault {
		return nil
	}
	if f == Refuse {
		s.lis.Close()
		for c := range s.conns {
			c.Close()
		}
		s.fault = f
		return nil
	}
	if s.fault == Refuse {
		var lis net.Listener
		var err error
		// The closed port may linger a moment in the kernel's tables.
		for i := 0; i < 50; i++ {
			if lis, err = net.Listen("tcp", s.addr); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			return fmt.Errorf("listen on %s again: %w", s.addr, err)
		}
		s.lis = lis
		go s.srv.Serve(lis)
	}
	s.fault = f
	return nil
}

func (s *Server) currentFault() Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fault
}

// trackConn keeps the open connections, so that Refuse can drop them (a
// CLI's kept-alive connection would still reach the endpoint).
func (s *Server) trackConn(c net.Conn, st http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch st {
	case http.StateNew:
		s.conns[c] = struct{}{}
	case http.StateClosed, http.StateHijacked:
		delete(s.conns, c)
	}
}

// writeFault answers a model request with status f in the vendor's error
// body. The shapes are the vendors' documented ones:
//
//   - Anthropic (API reference, "Errors"): {"type":"error","error":{"type",
//     "message"},"request_id"} with a request-id header; 500 api_error,
//     529 overloaded_error, 401 authentication_error "invalid x-api-key".
//   - OpenAI (API reference, "Error codes"; the body every error of the
//     Responses API has): {"error":{"message","type","param","code"}};
//     401 invalid_api_key "Incorrect API key provided: ...", 500
//     server_error "The server had an error while processing your
//     request. Sorry about that!". OpenAI answers an overload with 503
//     ("Slow Down"); a 529 asked of the OpenAI side gets its overload
//     body all the same.
func (s *Server) writeFault(w http.ResponseWriter, r *http.Request, f Fault) {
	id := s.id("req")
	w.Header().Set("Content-Type", "application/json")
	var body any
	if strings.HasPrefix(r.URL.Path, "/v1/messages") {
		typ, msg := "api_error", "Internal server error"
		switch {
		case f == 401:
			typ, msg = "authentication_error", "invalid x-api-key"
		case f == 403:
			typ, msg = "permission_error", "Your API key does not have permission to use the specified resource."
		case f == 429:
			typ, msg = "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"
		case f == 529:
			typ, msg = "overloaded_error", "Overloaded"
		case f < 500:
			typ, msg = "invalid_request_error", "invalid request"
		}
		w.Header().Set("Request-Id", id)
		body = map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}, "request_id": id}
	} else {
		typ, msg, code := "server_error", "The server had an error while processing your request. Sorry about that!", any(nil)
		switch {
		case f == 401:
			typ, msg, code = "invalid_request_error", "Incorrect API key provided: sk-scrip*******************6789. You can find your API key at https://platform.openai.com/account/api-keys.", "invalid_api_key"
		case f == 429:
			typ, msg, code = "requests", "Rate limit reached for requests", "rate_limit_exceeded"
		case f == 503 || f == 529:
			msg = "The engine is currently overloaded, please try again later"
		case f < 500:
			typ, msg = "invalid_request_error", "invalid request"
		}
		w.Header().Set("X-Request-Id", id)
		body = map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code}}
	}
	b, _ := json.Marshal(body)
	w.WriteHeader(int(f))
	w.Write(b)
}
