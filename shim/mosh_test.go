package shim

import (
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/box"
)

// TestMoshLines: what mosh 1.4's scripts/mosh.pl sends as ssh's
// ProxyCommand and as the command, in each of its modes, is recognised;
// other commands are not.
func TestMoshLines(t *testing.T) {
	for _, tc := range []struct {
		proxy string
		want  bool
	}{
		{`'/usr/bin/mosh' '--family=prefer-inet' --fake-proxy -- %h %p`, true},
		{`'mosh' '--family=inet' --fake-proxy -- %h %p`, true},
		{`/opt/mosh/bin/mosh --fake-proxy -- main 22`, true},
		{`cocoonbox-ssh --stdio %n`, false},
		{`nc %h %p`, false},
		{`mosh-fake --fake-proxy`, false},
		{``, false},
	} {
		if got := moshFakeProxy(tc.proxy); got != tc.want {
			t.Errorf("moshFakeProxy(%q) = %v, want %v", tc.proxy, got, tc.want)
		}
	}
	for _, tc := range []struct {
		line string
		want bool
	}{
		{`mosh-server 'new' '-c' '256' '-s' '-l' 'LANG=C.UTF-8'`, true},
		{`sh -c '[ -n "$SSH_CONNECTION" ] && printf "\nMOSH SSH_CONNECTION %s\n" "$SSH_CONNECTION"' ; mosh-server 'new' '-s'`, true},
		{`/usr/local/bin/mosh-server 'new' '-p' '60001'`, true},
		{`mosh-server`, false},
		{`echo mosh-server new`, false},
		{`man mosh-server`, false},
		{`ls`, false},
	} {
		if got := IsMoshServer(tc.line); got != tc.want {
			t.Errorf("IsMoshServer(%q) = %v, want %v", tc.line, got, tc.want)
		}
	}
}

// TestMoshUDP: a box behind an endpoint on this machine is reached at
// 127.0.0.1; one behind any other endpoint is refused, naming it.
func TestMoshUDP(t *testing.T) {
	for _, u := range []string{"unix:///run/cocoonbox.sock", "http://127.0.0.1:8080", "https://localhost:8443", "http://[::1]:80"} {
		ep, err := box.ParseEndpoint(u)
		if err != nil {
			t.Fatal(err)
		}
		if ip, err := MoshUDP(ep, "main"); ip != "127.0.0.1" || err != nil {
			t.Errorf("MoshUDP(%s) = %q, %v; want 127.0.0.1", u, ip, err)
		}
	}
	for _, u := range []string{"https://api.cocoonbox.dev", "https://192.0.2.10:8443", "https://boxes.example.com"} {
		ep, err := box.ParseEndpoint(u)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := MoshUDP(ep, "dev"); err == nil || !strings.Contains(err.Error(), "mosh needs UDP to box dev, which "+ep.URL) {
			t.Errorf("MoshUDP(%s): %v; want a refusal naming the box and endpoint", u, err)
		}
	}
}
