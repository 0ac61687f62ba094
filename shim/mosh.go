package shim

import (
	"fmt"
	"path"
	"regexp"

	"github.com/cocoonbox/cocoonbox/box"
)

// mosh (mobile-shell/mosh, scripts/mosh.pl) starts mosh-server over ssh
// and then talks UDP to the server's address, which it learns in one of
// three ways (--experimental-remote-ip): by default ("proxy") it runs ssh
// with -o "ProxyCommand=mosh --fake-proxy -- %h %p", a netcat of its own
// that resolves %h, connects to it and prints "MOSH IP ADDRESS" on
// stderr; "remote" asks the server's shell for $SSH_CONNECTION's server
// address; "local" resolves the host name itself. A box's address is
// none of these: its only way in is the cocoonbox API. So cocoonbox-ssh,
// run by mosh as its ssh, answers the fake proxy itself with the box's
// UDP address (MoshUDP), and SSH_CONNECTION's server address is that same
// address.

// moshUDPAddr is a local box's address for mosh's UDP: its commands run
// on this machine, where mosh-server -s binds SSH_CONNECTION's server
// address.
const moshUDPAddr = "127.0.0.1"

// MoshUDP returns the address at which mosh-client reaches a mosh-server
// run in a box through ep over UDP, or the one-line error that says why it
// cannot and what to use instead: only a local box (ep.Local) is on a
// machine this one can send UDP to; the service's boxes are reached only
// through its API.
func MoshUDP(ep box.Endpoint, boxName string) (string, error) {
	if ep.Local() {
		return moshUDPAddr, nil
	}
	return "", fmt.Errorf("mosh needs UDP to box %s, which %s reaches only through the cocoonbox API; use cocoonbox rsh %[1]s or cocoonbox-ssh %[1]s instead", boxName, ep.URL)
}

// moshServerLine matches the command line mosh runs to start its server:
// mosh-server (or --server's program) with the arguments quoted one by
// one, the first being 'new', after $SSH_CONNECTION's printf in "remote"
// mode.
var moshServerLine = regexp.MustCompile(`(^|[;&|]\s*)\S*mosh-server\S*\s+'new'(\s|$)`)

// IsMoshServer reports whether line is mosh's command to start
// mosh-server.
func IsMoshServer(line string) bool { return moshServerLine.MatchString(line) }

// moshFakeProxy reports whether a ProxyCommand is mosh's own
// "mosh --fake-proxy -- %h %p", which a box's name would not resolve in.
func moshFakeProxy(cmd string) bool {
	words, err := splitWords(cmd)
	if err != nil || len(words) < 2 || path.Base(words[0]) != "mosh" {
		return false
	}
	for _, w := range words[1:] {
		if w == "--fake-proxy" {
			return true
		}
	}
	return false
}

// mosh plays the part of mosh's fake proxy when mosh runs the shim as its
// ssh (mosh --ssh=cocoonbox-ssh BOX): "MOSH IP ADDRESS" on stderr, which
// mosh reads with the output of ssh and mosh-server; and refuses, before
// anything runs, to start a mosh-server whose UDP would not reach.
func (r *runner) mosh(ep box.Endpoint, line string) error {
	fake := moshFakeProxy(r.o.otherValue("proxycommand"))
	if !fake && !IsMoshServer(line) {
		return nil
	}
	ip, err := MoshUDP(ep, r.o.Box())
	if err != nil {
		return err
	}
	if fake {
		fmt.Fprintf(r.env.Stderr, "MOSH IP %s\n", ip)
	}
	return nil
}
