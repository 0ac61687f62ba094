package shim

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/cocoonbox/cocoonbox/relay"
)

// socksConnect is the server side of a SOCKS handshake on conn, as ssh -D
// (and ssh -R with no connecting end) answers it (OpenSSH channels.c): SOCKS4, SOCKS4a and SOCKS5 (RFC 1928)
// CONNECT with no authentication; BIND, UDP ASSOCIATE and authentication
// methods are refused. It dials the requested host and port with dial and
// replies success or failure; on success the stream is the connection's.
//
// Our own rather than a library: the Go SOCKS servers speak only SOCKS5
// and want a net.Conn dialer, ssh -D speaks SOCKS4 too, and CONNECT is all
// it does.
func socksConnect(conn io.ReadWriter, dial func(host string, port int) (relay.Conn, error)) (relay.Conn, error) {
	br := bufio.NewReader(conn)
	ver, err := br.ReadByte()
	if err != nil {
		return nil, fmt.Errorf("socks: %w", err)
	}
	var rc relay.Conn
	switch ver {
	case 4:
		rc, err = socks4(br, conn, dial)
	case 5:
		rc, err = socks5(br, conn, dial)
	default:
		return nil, fmt.Errorf("socks: unknown version %d", ver)
	}
	if err != nil {
		return nil, err
	}
	if br.Buffered() > 0 {
		// Bytes the client sent after its request belong to the stream.
		b, _ := br.Peek(br.Buffered())
		if _, err := rc.Write(b); err != nil {
			rc.Close()
			return nil, err
		}
	}
	return rc, nil
}

// socks4: VN(4) CD DSTPORT DSTIP USERID NUL [HOST NUL when DSTIP is 0.0.0.x].
func socks4(br *bufio.Reader, conn io.Writer, dial func(string, int) (relay.Conn, error)) (relay.Conn, error) {
	var hdr [7]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return nil, fmt.Errorf("socks4: %w", err)
	}
	reply := func(ok bool) {
		code := byte(91)
		if ok {
			code = 90
		}
		conn.Write([]byte{0, code, 0, 0, 0, 0, 0, 0})
	}
	if _, err := readCString(br); err != nil { // the user id, unused
		return nil, err
	}
	port := int(binary.BigEndian.Uint16(hdr[1:3]))
	ip := net.IP(hdr[3:7])
	host := ip.String()
	if ip[0] == 0 && ip[1] == 0 && ip[2] == 0 && ip[3] != 0 {
		h, err := readCString(br)
		if err != nil {
			return nil, err
		}
		host = h
	}
	if hdr[0] != 1 {
		reply(false)
		return nil, fmt.Errorf("socks4: command %d is not supported, only CONNECT", hdr[0])
	}
	rc, err := dial(host, port)
	reply(err == nil)
	return rc, err
}

// readCString reads a NUL-terminated string of at most 255 bytes.
func readCString(br *bufio.Reader) (string, error) {
	var b []byte
	for {
		c, err := br.ReadByte()
		if err != nil {
			return "", fmt.Errorf("socks4: %w", err)
		}
		if c == 0 {
			return string(b), nil
		}
		if len(b) == 255 {
			return "", errors.New("socks4: a name longer than 255 bytes")
		}
		b = append(b, c)
	}
}

// SOCKS5 reply codes (RFC 1928 section 6).
const (
	socks5OK          = 0
	socks5Failure     = 1
	socks5Unreachable = 4
	socks5Refused     = 5
	socks5BadCommand  = 7
	socks5BadAddress  = 8
)

// readCounted reads a count byte and then that many bytes, as SOCKS5
// sends its methods and a domain name (RFC 1928 sections 3 and 5).
func readCounted(br *bufio.Reader) ([]byte, error) {
	n, err := br.ReadByte()
	if err != nil {
		return nil, err
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(br, b); err != nil {
		return nil, err
	}
	return b, nil
}

func socks5(br *bufio.Reader, conn io.Writer, dial func(string, int) (relay.Conn, error)) (relay.Conn, error) {
	methods, err := readCounted(br)
	if err != nil {
		return nil, fmt.Errorf("socks5: %w", err)
	}
	noAuth := false
	for _, m := range methods {
		noAuth = noAuth || m == 0
	}
	if !noAuth {
		conn.Write([]byte{5, 0xff})
		return nil, errors.New("socks5: the client offers no method without authentication")
	}
	if _, err := conn.Write([]byte{5, 0}); err != nil {
		return nil, err
	}
	var hdr [4]byte // VER CMD RSV ATYP
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return nil, fmt.Errorf("socks5: %w", err)
	}
	reply := func(code byte) {
		conn.Write([]byte{5, code, 0, 1, 0, 0, 0, 0, 0, 0})
	}
	var host string
	switch hdr[3] {
	case 1, 4:
		ip := make(net.IP, 4)
		if hdr[3] == 4 {
			ip = make(net.IP, 16)
		}
		if _, err := io.ReadFull(br, ip); err != nil {
			return nil, fmt.Errorf("socks5: %w", err)
		}
		host = ip.String()
	case 3:
		name, err := readCounted(br)
		if err != nil {
			return nil, fmt.Errorf("socks5: %w", err)
		}
		host = string(name)
	default:
		reply(socks5BadAddress)
		return nil, fmt.Errorf("socks5: address type %d is not supported", hdr[3])
	}
	var pb [2]byte
	if _, err := io.ReadFull(br, pb[:]); err != nil {
		return nil, fmt.Errorf("socks5: %w", err)
	}
	port := int(binary.BigEndian.Uint16(pb[:]))
	if hdr[0] != 5 || hdr[1] != 1 {
		reply(socks5BadCommand)
		return nil, fmt.Errorf("socks5: command %d is not supported, only CONNECT", hdr[1])
	}
	rc, err := dial(host, port)
	if err != nil {
		code := byte(socks5Failure)
		if de, ok := errors.AsType[*relay.DialError](err); ok {
			code = socks5Unreachable
			if strings.Contains(strings.ToLower(de.Reason), "refused") {
				code = socks5Refused
			}
		}
		reply(code)
		return nil, err
	}
	reply(socks5OK)
	return rc, nil
}
