package shim

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestForwardSpecsLikeOpenSSH parses each -L, -D and -W spec with Parse and
// with the real ssh -G (OpenSSH's own parse_forward), and wants the same
// verdict and, where both accept, the same localforward/dynamicforward
// lines. The unix-socket-in-the-box forms are ours to refuse.
func TestForwardSpecsLikeOpenSSH(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Fatal("the OpenSSH client is needed (scripts/deps.sh installs it)")
	}
	specs := []struct{ flag, spec string }{
		{"-L", "8080:localhost:80"},
		{"-L", "127.0.0.1:8080:localhost:80"},
		{"-L", "[::1]:8080:[::1]:80"},
		{"-L", "*:8080:h:80"},
		{"-L", ":8080:h:80"},
		{"-L", "localhost:8080:h:80"},
		{"-L", "/tmp/x.sock:h:80"},
		{"-L", `h\:x:1:a:2`},
		{"-L", " 8080:h:80"},
		{"-L", "0:h:80"},
		{"-L", "99999:h:80"},
		{"-L", "8080:h:0"},
		{"-L", "8080:h"},
		{"-L", "8080:h:80:"},
		{"-L", "8080::80"},
		{"-L", "a:b:c:d:e"},
		{"-L", "x:h:80"},
		{"-L", "[::1:8080:h:80"},
		{"-L", "1/a/2"},
		{"-D", "1080"},
		{"-D", "localhost:1080"},
		{"-D", "[::1]:1080"},
		{"-D", "*:1080"},
		{"-D", "/tmp/socks.sock"},
		{"-D", "a:b:c"},
		{"-D", "0"},
		{"-D", "x"},
		{"-R", "8080:localhost:80"},
		{"-R", "0:localhost:80"},
		{"-R", "00:h:1"},
		{"-R", "127.0.0.1:8080:h:80"},
		{"-R", "[::1]:0:h:22"},
		{"-R", "*:8080:h:80"},
		{"-R", "8080"},
		{"-R", "0"},
		{"-R", "*:8080"},
		{"-R", "localhost:8080"},
		{"-R", "h:0"},
		{"-R", "/tmp/a.sock:localhost:80"},
		{"-R", "8080:/tmp/l.sock"},
		{"-R", "0:/x.sock"},
		{"-R", "/a.sock:/b.sock"},
		{"-R", "/tmp/x.sock"},
		{"-R", "0:h"},
		{"-R", "8080:h:0"},
		{"-R", "bad"},
		{"-R", "a:b:c:d:e"},
		{"-R", "65536:h:1"},
		{"-R", "-1:h:1"},
		{"-R", "8080:h:x"},
		{"-W", "h:22"},
		{"-W", "[::1]:22"},
		{"-W", "h"},
		{"-W", "h:0"},
		{"-W", "h:22:x"},
	}
	for _, s := range specs {
		out, err := exec.Command("ssh", "-F", "/dev/null", "-G", s.flag, s.spec, "x").Output()
		theirsOK := err == nil
		var theirs []string
		for _, l := range strings.Split(string(out), "\n") {
			if isForwardLine(l) {
				theirs = append(theirs, l)
			}
		}
		o, perr := Parse([]string{s.flag, s.spec, "x"})
		oursOK := perr == nil
		if oursOK != theirsOK {
			t.Errorf("%s %q: ours %v, OpenSSH's ok=%v", s.flag, s.spec, perr, theirsOK)
			continue
		}
		if !oursOK {
			continue
		}
		var b strings.Builder
		o.WriteConfig(&b)
		var ours []string
		for _, l := range strings.Split(b.String(), "\n") {
			if isForwardLine(l) {
				ours = append(ours, l)
			}
		}
		if !slices.Equal(ours, theirs) {
			t.Errorf("%s %q: -G prints %q, OpenSSH %q", s.flag, s.spec, ours, theirs)
		}
	}
}

// isForwardLine is whether l is one of ssh -G's forward lines.
func isForwardLine(l string) bool {
	return strings.HasPrefix(l, "localforward ") || strings.HasPrefix(l, "dynamicforward ") || strings.HasPrefix(l, "remoteforward ")
}

func TestForwardRefusals(t *testing.T) {
	for _, args := range [][]string{
		{"-W", "/run/x.sock", "x"},
		{"-o", "RemoteForward=8080 h:80 x", "x"},
		{"-W", "h:1", "-W", "h:2", "x"},
		{"-o", "ExitOnForwardFailure=maybe", "x"},
	} {
		_, err := Parse(args)
		if _, ok := err.(*UsageError); !ok {
			t.Errorf("Parse(%q) = %v, want a UsageError", args, err)
		}
	}
}

func TestForwardOptions(t *testing.T) {
	o, err := Parse([]string{"-o", "LocalForward=7000 localhost:80", "-o", "DynamicForward 1080", "-g", "-o", "ExitOnForwardFailure=yes", "-o", "ExitOnForwardFailure=no", "x"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Forward{{ListenPort: 7000, ConnectHost: "localhost", ConnectPort: 80}, {Dynamic: true, ListenPort: 1080}}
	if !slices.Equal(o.Forwards, want) || !o.GatewayPorts || !o.ExitOnForwardFailure {
		t.Errorf("got %+v gateway %v exit %v", o.Forwards, o.GatewayPorts, o.ExitOnForwardFailure)
	}
	o, err = Parse([]string{"-o", "RemoteForward=0 localhost:80", "-o", "RemoteForward 1080", "-R", "/box.sock:/here.sock", "x"})
	if err != nil {
		t.Fatal(err)
	}
	want = []Forward{{Remote: true, ConnectHost: "localhost", ConnectPort: 80}, {Remote: true, Dynamic: true, ListenPort: 1080}, {Remote: true, ListenPath: "/box.sock", ConnectPath: "/here.sock"}}
	if !slices.Equal(o.Forwards, want) {
		t.Errorf("remote forwards: got %+v, want %+v", o.Forwards, want)
	}
	o, err = Parse([]string{"-L", "1:h:2", "-W", "h:22", "x"})
	if err != nil {
		t.Fatal(err)
	}
	if o.StdioHost != "h" || o.StdioPort != 22 || o.Session != SessionNone || o.TTY != TTYNever || !o.ExitOnForwardFailure || len(o.ActiveForwards()) != 0 {
		t.Errorf("-W: got %+v", o)
	}
}

// TestListenAddresses binds as ssh's channel_setup_fwd_listener does:
// loopback by default, every address with GatewayPorts or "*".
func TestListenAddresses(t *testing.T) {
	for _, tc := range []struct {
		fw      Forward
		gateway bool
		want    []string // the hosts of the listeners' addresses
	}{
		{Forward{}, false, []string{"127.0.0.1", "::1"}},
		{Forward{ListenHost: "localhost", Explicit: true}, true, []string{"127.0.0.1", "::1"}},
		{Forward{ListenHost: "127.0.0.1", Explicit: true}, true, []string{"127.0.0.1"}},
		// Every address is a socket for each family, as ssh binds it.
		{Forward{}, true, []string{"0.0.0.0", "::"}},
		{Forward{ListenHost: "*", Explicit: true}, false, []string{"0.0.0.0", "::"}},
		{Forward{ListenHost: "", Explicit: true}, false, []string{"0.0.0.0", "::"}},
		// An address of one family listens on that family alone, as
		// ssh binds it.
		{Forward{ListenHost: "0.0.0.0", Explicit: true}, false, []string{"0.0.0.0"}},
		{Forward{ListenHost: "::", Explicit: true}, false, []string{"::"}},
	} {
		l0, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		tc.fw.ListenPort = l0.Addr().(*net.TCPAddr).Port
		l0.Close()
		ls, err := listen(tc.fw, tc.gateway)
		if err != nil {
			t.Errorf("%+v gateway %v: %v", tc.fw, tc.gateway, err)
			continue
		}
		var got []string
		for _, l := range ls {
			got = append(got, l.Addr().(*net.TCPAddr).IP.String())
			// Every address of one family is not the other's loopback.
			other := map[string]string{"0.0.0.0": "::1", "::": "127.0.0.1"}[tc.fw.ListenHost]
			if c, err := net.Dial("tcp", net.JoinHostPort(other, strconv.Itoa(tc.fw.ListenPort))); other != "" && err == nil {
				c.Close()
				t.Errorf("%+v: reached on %s too", tc.fw, other)
			}
			l.Close()
		}
		if !slices.Equal(got, tc.want) && !(len(tc.want) == 2 && slices.Equal(got, tc.want[:1])) {
			// (a machine without IPv6 has only 127.0.0.1)
			t.Errorf("%+v gateway %v: listens on %q, want %q", tc.fw, tc.gateway, got, tc.want)
		}
	}
	sock := filepath.Join(t.TempDir(), "fwd.sock")
	ls, err := listen(Forward{ListenPath: sock}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer ls[0].Close()
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("unix socket: %v, mode %v; want 0600", err, fi.Mode().Perm())
	}
}

// TestForwardToSocket: -L to a unix socket in the box, in OpenSSH's three
// forms, and its -G line as ssh -G prints it (which adds a stray
// dynamicforward line of its own, hence no comparison with it here).
func TestForwardToSocket(t *testing.T) {
	for _, tt := range []struct {
		spec, line string
		want       Forward
	}{
		{"8080:/run/x.sock", "localforward 8080 /run/x.sock", Forward{ListenPort: 8080, ConnectPath: "/run/x.sock"}},
		{"127.0.0.1:8080:/run/x.sock", "localforward [127.0.0.1]:8080 /run/x.sock", Forward{ListenHost: "127.0.0.1", Explicit: true, ListenPort: 8080, ConnectPath: "/run/x.sock"}},
		{"/tmp/a.sock:/run/x.sock", "localforward /tmp/a.sock /run/x.sock", Forward{ListenPath: "/tmp/a.sock", ConnectPath: "/run/x.sock"}},
	} {
		o, err := Parse([]string{"-L", tt.spec, "x"})
		if err != nil || len(o.Forwards) != 1 || o.Forwards[0] != tt.want {
			t.Errorf("-L %s: %v %+v, want %+v", tt.spec, err, o, tt.want)
			continue
		}
		if got := o.Forwards[0].String(); got != tt.line {
			t.Errorf("-L %s: -G line %q, want %q", tt.spec, got, tt.line)
		}
	}
}
