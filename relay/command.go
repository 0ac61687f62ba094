package relay

import (
	"strconv"

	"github.com/cocoonbox/cocoonbox/internal/shellquote"
)

// Command is the line the box user's shell runs for one relay to
// host:port, which CheckTarget must have accepted, once Dial has found
// that the agent alone does not do. It tries, in order:
//
//  1. `cocoonbox-agent relay --ready`, if the agent on the PATH has the
//     verb (`relay --check` exits 0);
//  2. python3, whose socket module does the connect and the half-close;
//  3. bash's /dev/tcp, which cannot half-close: the target sees the
//     client's EOF only when the connection ends;
//
// and else prints one refusal line and exits ExitNoRelay. It runs under
// /bin/sh whatever the user's shell (fish, csh); every part is
// single-quoted: host comes from the user.
func Command(host string, port uint32) string {
	return "exec /bin/sh -c " + shellquote.Quote(script(host, port))
}

func script(host string, port uint32) string {
	h, p := shellquote.Quote(host), strconv.FormatUint(uint64(port), 10)
	return "if cocoonbox-agent relay --check >/dev/null 2>&1; then exec cocoonbox-agent relay --ready -- " + h + " " + p + "; fi; " +
		"if command -v python3 >/dev/null 2>&1; then exec python3 -c " + shellquote.Quote(pythonRelay) + " " + h + " " + p + "; fi; " +
		"if command -v bash >/dev/null 2>&1; then exec bash -c " + shellquote.Quote(bashRelay) + " relay " + h + " " + p + "; fi; " +
		"echo 'cocoonbox relay: this box has no relay: no cocoonbox-agent with the relay verb, no python3, no bash' >&2; exit " + strconv.Itoa(ExitNoRelay)
}

// UnixCommand is the line the box user's shell runs for one relay to the
// unix socket at path, which CheckSocket must have accepted: python3's
// relay (the agent's relay verb is for TCP only), else one refusal line
// and ExitNoRelay. A relative path is from the workspace.
func UnixCommand(path string) string {
	return "exec /bin/sh -c " + shellquote.Quote("if command -v python3 >/dev/null 2>&1; then exec python3 -c "+shellquote.Quote(pythonRelay)+" "+shellquote.Quote(path)+"; fi; "+
		"echo 'cocoonbox relay: this box has no relay to a unix socket: no python3' >&2; exit "+strconv.Itoa(ExitNoRelay))
}

// pythonRelay is the python3 fallback: argv HOST PORT, or a unix socket's
// PATH alone. The down direction ends the relay; the up direction's EOF is
// a shutdown of the socket's write side, so the target can still answer.
const pythonRelay = `import os, socket, sys, threading
if len(sys.argv) == 2:
    addr = sys.argv[1]
    def connect():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(30)
        s.connect(addr)
        return s
else:
    host, port = sys.argv[1], int(sys.argv[2])
    addr = "%s:%d" % (host, port)
    def connect():
        return socket.create_connection((host, port), timeout=30)
try:
    s = connect()
except OSError as e:
    sys.stderr.write("connect %s: %s\n" % (addr, e.strerror or e))
    sys.exit(3)
s.settimeout(None)
def out(b):
    m = memoryview(b)
    while m:
        m = m[os.write(1, m):]
out(b"\x06")
def up():
    try:
        while True:
            b = os.read(0, 65536)
            if not b:
                break
            s.sendall(b)
        s.shutdown(socket.SHUT_WR)
    except OSError:
        pass
threading.Thread(target=up, daemon=True).start()
try:
    while True:
        b = s.recv(65536)
        if not b:
            break
        out(b)
except OSError as e:
    sys.stderr.write("relay %s: %s\n" % (addr, e.strerror or e))
    sys.exit(1)
`

// bashRelay is the bash fallback: argv HOST PORT after $0. The copy from
// the target runs in front; when it ends the copy toward it is killed.
const bashRelay = `{ exec 3<>"/dev/tcp/$1/$2"; } 2>/dev/null || { echo "connect $1:$2: failed" >&2; exit 3; }
printf '\006'
exec 4<&0
cat <&4 >&3 &
cat <&3
kill $! 2>/dev/null
exit 0`
