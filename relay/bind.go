package relay

import (
	"net"
	"strconv"
)

// BindTCP listens on port of host as OpenSSH binds a TCP forward's
// address (channels.c channel_setup_fwd_listener_tcpip and
// channel_fwd_bind_addr; for -R, sshd's GatewayPorts clientspecified):
// "" and "*" every address; "localhost" 127.0.0.1 and ::1, either being
// enough (port 0: the second on the port the first was given); any
// other host that address. ssh -L's listener (shim) and the box half of
// -R's (cocoonbox-agent listen) both bind so. The error is the first
// listen's.
func BindTCP(host string, port uint32) ([]net.Listener, error) {
	p := strconv.FormatUint(uint64(port), 10)
	switch host {
	case "", "*":
		l, err := net.Listen("tcp", ":"+p)
		if err != nil {
			return nil, err
		}
		return []net.Listener{l}, nil
	case "localhost":
		var ls []net.Listener
		var first error
		for _, h := range []string{"127.0.0.1", "::1"} {
			l, err := net.Listen("tcp", net.JoinHostPort(h, p))
			if err != nil {
				if first == nil {
					first = err
				}
				continue
			}
			ls = append(ls, l)
			p = strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
		}
		if len(ls) == 0 {
			return nil, first
		}
		return ls, nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, p))
	if err != nil {
		return nil, err
	}
	return []net.Listener{l}, nil
}
