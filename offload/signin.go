package offload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"github.com/cocoonbox/cocoonbox/agentwire"
)

// maxPending bounds the text a LinkFinder keeps while a link or an OSC 8
// sequence is incomplete, in bytes.
const maxPending = 8 << 10

// AllowedLink returns the normalized form of raw when it is a link a
// sign-in may open (DESIGN.md "Security invariants" 3): https, on one of
// hosts or a subdomain of one, no userinfo, no port but 443, RFC 3986
// characters only (and not the quote ').
func AllowedLink(raw string, hosts []string) (string, bool) {
	for i := 0; i < len(raw); i++ {
		if !linkChar(raw[i]) {
			return "", false
		}
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.User != nil || u.Opaque != "" {
		return "", false
	}
	if p := u.Port(); p != "" && p != "443" {
		return "", false
	}
	host := u.Hostname()
	for i := 0; i < len(host); i++ {
		c := host[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			return "", false
		}
	}
	for _, h := range hosts {
		if host == h || strings.HasSuffix(host, "."+h) {
			return u.String(), true
		}
	}
	return "", false
}

// linkChar is RFC 3986's unreserved, reserved and % characters, less the
// single quote, which ends a link in a shell-quoted line.
func linkChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("-._~:/?#[]@!$&()*+,;=%", c) >= 0
}

// LinkFinder watches a terminal's output for the first link AllowedLink
// accepts, plain or as an OSC 8 hyperlink target, across writes. An OSC 8
// target with a character outside RFC 3986 is skipped whole, never
// shortened. It is safe for one writer.
type LinkFinder struct {
	// Hosts are the vendor's hosts.
	Hosts []string

	mu      sync.Mutex
	pending []byte
	found   string
}

// Write scans p; it never fails.
func (f *LinkFinder) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.found != "" {
		return len(p), nil
	}
	f.pending = append(f.pending, p...)
	f.scan()
	if len(f.pending) > maxPending {
		f.pending = f.pending[len(f.pending)-maxPending:]
	}
	return len(p), nil
}

// Found returns the link, or "" while none has been seen.
func (f *LinkFinder) Found() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.found
}

var (
	osc8  = []byte("\x1b]8;")
	https = []byte("https://")
)

func (f *LinkFinder) scan() {
	b := f.pending
	for {
		o := bytes.Index(b, osc8)
		h := bytes.Index(b, https)
		if o < 0 && h < 0 {
			// Keep a tail that may begin either marker.
			keep := min(len(b), len(https)-1)
			f.pending = append([]byte(nil), b[len(b)-keep:]...)
			return
		}
		if o >= 0 && (h < 0 || o < h) {
			rest := b[o+len(osc8):]
			end, termLen := -1, 0
			if i := bytes.IndexByte(rest, '\a'); i >= 0 {
				end, termLen = i, 1
			}
			if i := bytes.Index(rest, []byte("\x1b\\")); i >= 0 && (end < 0 || i < end) {
				end, termLen = i, 2
			}
			if end < 0 {
				f.pending = append([]byte(nil), b[o:]...)
				return
			}
			if _, target, ok := bytes.Cut(rest[:end], []byte(";")); ok && len(target) > 0 {
				if u, ok := AllowedLink(string(target), f.Hosts); ok {
					f.found = u
					return
				}
			}
			b = rest[end+termLen:]
			continue
		}
		end := h
		for end < len(b) && linkChar(b[end]) {
			end++
		}
		if end == len(b) {
			f.pending = append([]byte(nil), b[h:]...)
			return
		}
		link := strings.TrimRight(string(b[h:end]), ".,:;!?")
		if u, ok := AllowedLink(link, f.Hosts); ok {
			f.found = u
			return
		}
		b = b[end:]
	}
}

// SignInKey signs kind's CLI in box a.Box in with key (`cocoonbox-agent
// offload sign-in --with-api-key`, the key on its stdin, never in its
// argv). Its failures are *Error: refused (exit 3, nothing changed in the
// box) for a CLI that is not installed there, with install-cli as the next
// step, or for a settings file the box agent will not change; failed
// (exit 1) else.
func (a *Agent) SignInKey(ctx context.Context, k agentwire.Kind, key string) (*agentwire.SignInResult, error) {
	var r agentwire.SignInResult
	err := a.call(ctx, strings.NewReader(key+"\n"), &r, agentwire.SignIn.Argv(agentwire.SignInRequest{Kind: k.Name(), WithAPIKey: true}))
	if err == nil {
		return &r, nil
	}
	ae, ok := errors.AsType[*AgentError](err)
	if !ok {
		return nil, &Error{Code: ExitFailed, Err: fmt.Errorf("box %s: sign-in: %w", a.Box, err)}
	}
	e := &Error{Code: ExitFailed, Err: fmt.Errorf("box %s: %s", a.Box, ae.Msg)}
	switch {
	case ae.Code == agentwire.CodeUsage && (strings.Contains(ae.Msg, "unknown verb") || strings.Contains(ae.Msg, "unknown flag")):
		// A box agent older than the verb.
		e.Code, e.Err = ExitRefused, fmt.Errorf("box %s: its %s has no sign-in by key; upgrade the box", a.Box, agentwire.Program)
	case ae.Refused() || ae.Code == agentwire.CodeUsage:
		e.Code = ExitRefused
		if ae.CLI != nil {
			e.Next = []Step{{"install " + k.Title() + " in the box first: ", Command{Verb: VerbInstallCLI, Kind: k.Name(), Box: a.Box}}}
		}
	}
	return nil, e
}
