package offload

import (
	"context"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/rogpeppe/go-internal/txtar"
)

// macFixture is one recording of testdata/macos: the command as it was
// run, its stdout, and what its parser must read from it.
type macFixture struct {
	name, command string
	stdout        []byte
	want          []string
}

func macFixtures(t *testing.T) []macFixture {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "macos", "*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures in testdata/macos (%v)", err)
	}
	var fs []macFixture
	for _, f := range files {
		a, err := txtar.ParseFile(f)
		if err != nil {
			t.Fatal(err)
		}
		fx := macFixture{name: filepath.Base(f)}
		note := map[string]string{}
		for _, l := range strings.Split(string(a.Comment), "\n") {
			if k, v, ok := strings.Cut(l, ": "); ok {
				note[k] = v
			}
		}
		// Every recording says what ran, where it came from and on which
		// macOS (or that the post does not say).
		for _, k := range []string{"command", "source", "macOS"} {
			if note[k] == "" {
				t.Errorf("%s: the note has no %q line", fx.name, k)
			}
		}
		fx.command = note["command"]
		for _, file := range a.Files {
			switch file.Name {
			case "stdout":
				fx.stdout = file.Data
			case "want":
				fx.want = strings.Fields(string(file.Data))
			}
		}
		if len(fx.stdout) == 0 {
			t.Errorf("%s: no stdout", fx.name)
		}
		fs = append(fs, fx)
	}
	return fs
}

// Each recorded macOS output reads as its note says, through the parser
// of the command that printed it.
func TestMacOSFixtures(t *testing.T) {
	seen := map[string]int{}
	for _, fx := range macFixtures(t) {
		t.Run(fx.name, func(t *testing.T) {
			var got []string
			switch cmd := strings.TrimPrefix(fx.command, "sudo "); {
			case strings.HasPrefix(cmd, "scutil --dns"):
				seen["scutil"]++
				got = parseScutilDNS(fx.stdout)
			case strings.HasPrefix(cmd, "lsof "):
				seen["lsof"]++
				for _, p := range slices.Sorted(maps.Keys(parseLsofListen(fx.stdout))) {
					got = append(got, strconv.Itoa(p))
				}
			default:
				t.Fatalf("no parser for %q", fx.command)
			}
			if diff := cmp.Diff(fx.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s read (-want +got):\n%s", fx.command, diff)
			}
		})
	}
	for _, c := range []string{"scutil", "lsof"} {
		if seen[c] < 2 {
			t.Errorf("%d recordings of %s; want at least 2", seen[c], c)
		}
	}
}

// fakeMacCommand puts an executable name on PATH that checks it was run
// with exactly args and prints stdout, as the Mac's own would; any other
// argv fails it with status 2.
func fakeMacCommand(t *testing.T, dir, name string, args []string, stdout []byte, status int) {
	t.Helper()
	out := filepath.Join(dir, name+".out")
	if err := os.WriteFile(out, stdout, 0o600); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\n" +
		"[ \"$*\" = '" + strings.Join(args, " ") + "' ] || { echo \"unexpected argv: $*\" >&2; exit 2; }\n" +
		"cat '" + out + "'\nexit " + strconv.Itoa(status) + "\n"
	if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

// On a Mac (goos darwin), ListeningPorts and SplitDNSDomains run lsof and
// scutil with the documented arguments and read what they print. The
// commands are stand-ins on PATH that print recorded macOS output.
func TestMacOSCommands(t *testing.T) {
	fixture := func(name string) []byte {
		for _, fx := range macFixtures(t) {
			if fx.name == name {
				return fx.stdout
			}
		}
		t.Fatalf("no fixture %s", name)
		return nil
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name        string
		lsof, dns   []byte
		lsofStatus  int
		dnsStatus   int
		wantPorts   map[int]bool
		wantDomains []string
	}{
		{"recorded", fixture("lsof-listen-airplay.txtar"), fixture("scutil-dns-vpn-supplemental.txtar"), 0, 0,
			map[int]bool{5000: true, 7000: true}, []string{"example.com"}},
		// lsof exits 1 when nothing listens; scutil's failure is no split DNS.
		{"nothing", nil, []byte("scutil: no\n"), 1, 1, map[int]bool{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := t.TempDir()
			fakeMacCommand(t, bin, "lsof", lsofListen[1:], tc.lsof, tc.lsofStatus)
			fakeMacCommand(t, bin, "scutil", scutilDNS[1:], tc.dns, tc.dnsStatus)
			t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
			ports, err := ListeningPorts(ctx, "darwin")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantPorts, ports); diff != "" {
				t.Errorf("ListeningPorts (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantDomains, SplitDNSDomains(ctx, "darwin")); diff != "" {
				t.Errorf("SplitDNSDomains (-want +got):\n%s", diff)
			}
			// Linux asks neither: no scutil, and /proc rather than lsof.
			if ds := SplitDNSDomains(ctx, "linux"); ds != nil {
				t.Errorf("SplitDNSDomains on linux = %v", ds)
			}
		})
	}
}

// On Linux the listening ports come from /proc/net/tcp*: a port this test
// listens on is among them.
func TestListeningPortsLinux(t *testing.T) {
	if _, err := os.Stat("/proc/net/tcp"); err != nil {
		t.Fatalf("this test runs on Linux: %v", err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	port := lis.Addr().(*net.TCPAddr).Port
	ports, err := ListeningPorts(context.Background(), "linux")
	if err != nil {
		t.Fatal(err)
	}
	if !ports[port] {
		t.Errorf("port %d listens but ListeningPorts did not list it (%d ports)", port, len(ports))
	}
}
