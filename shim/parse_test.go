package shim

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// opts is the Options Parse gives for "main" changed by f.
func opts(f func(o *Options)) Options {
	o := Options{Host: "main", EscapeChar: '~'}
	f(&o)
	return o
}

func TestParse(t *testing.T) {
	tests := []struct {
		args []string
		want Options
	}{
		{[]string{"main"}, opts(func(o *Options) {})},
		{[]string{"main", "echo", "a b"}, opts(func(o *Options) { o.Command = []string{"echo", "a b"} })},
		{[]string{"-T", "git@main", "git-upload-pack", "'repo'"}, opts(func(o *Options) {
			o.User, o.TTY, o.Command = "git", TTYNever, []string{"git-upload-pack", "'repo'"}
		})},
		{[]string{"-tt", "main"}, opts(func(o *Options) { o.TTY = TTYForced })},
		{[]string{"-t", "-t", "main"}, opts(func(o *Options) { o.TTY = TTYForced })},
		{[]string{"-ttt", "main"}, opts(func(o *Options) { o.TTY = TTYWanted })},
		{[]string{"-o", "RequestTTY=force", "-T", "main"}, opts(func(o *Options) { o.TTY = TTYNever })},
		{[]string{"-T", "-o", "RequestTTY=force", "main"}, opts(func(o *Options) { o.TTY = TTYNever })},
		{[]string{"-qnT", "main", "ls", "-l"}, opts(func(o *Options) {
			o.LogLevel, o.StdinNull, o.TTY, o.Command = LogQuiet, true, TTYNever, []string{"ls", "-l"}
		})},
		// -o in its three forms, keys in any case; SendEnv adds, SetEnv keeps
		// a name's first value.
		{[]string{"-oSendEnv=GIT_PROTOCOL", "-o", "SetEnv A=1", "-o", "ControlMaster = auto", "-o", "sendenv LC_* LANG", "-o", `SETENV A=2 B="x y"`, "main"}, opts(func(o *Options) {
			o.SendEnv = []string{"GIT_PROTOCOL", "LC_*", "LANG"}
			o.SetEnv = []string{"A=1", `B=x y`}
			o.Other = []Setting{{"controlmaster", "auto"}}
		})},
		{[]string{"-o", "SendEnv=A B C", "-o", "SendEnv=-B", "main"}, opts(func(o *Options) { o.SendEnv = []string{"A", "C"} })},
		// Ignored flags and options show in -G as their ssh_config keywords.
		{[]string{"-p", "22", "-l", "me", "-i", "k1", "-i", "k2", "-4", "-C", "-c", "aes128-ctr", "main.cocoonbox"}, opts(func(o *Options) {
			o.Host, o.User, o.Port = "main.cocoonbox", "me", "22"
			o.Other = []Setting{{"identityfile", "k1"}, {"identityfile", "k2"}, {"addressfamily", "inet"}, {"compression", "yes"}, {"ciphers", "aes128-ctr"}}
		})},
		{[]string{"-M", "-M", "-S", "/tmp/c", "-o", "ControlPersist=yes", "main"}, opts(func(o *Options) {
			o.Other = []Setting{{"controlmaster", "ask"}, {"controlpath", "/tmp/c"}, {"controlpersist", "yes"}}
		})},
		// The first of -l, -p, -o and the host word wins, as in ssh.
		{[]string{"-p22", "ssh://u@main:2222", "x"}, opts(func(o *Options) { o.User, o.Port, o.Command = "u", "22", []string{"x"} })},
		{[]string{"ssh://u@main:2222/"}, opts(func(o *Options) { o.User, o.Port = "u", "2222" })},
		{[]string{"-o", "User=c", "-l", "a", "b@main"}, opts(func(o *Options) { o.User = "c" })},
		{[]string{"-o", "Port=2", "-p", "1", "main"}, opts(func(o *Options) { o.Port = "2" })},
		{[]string{"-p", "022", "main"}, opts(func(o *Options) { o.Port = "22" })},
		{[]string{"a@b@main"}, opts(func(o *Options) { o.User = "a@b" })},
		// Options after the host word count, up to the first command word.
		{[]string{"main", "-n", "-p", "5"}, opts(func(o *Options) { o.StdinNull, o.Port = true, "5" })},
		{[]string{"main", "ls", "-n"}, opts(func(o *Options) { o.Command = []string{"ls", "-n"} })},
		{[]string{"main", "--", "-n"}, opts(func(o *Options) { o.Command = []string{"-n"} })},
		{[]string{"--", "main", "-n"}, opts(func(o *Options) { o.Command = []string{"-n"} })},
		{[]string{"-vvv", "main"}, opts(func(o *Options) { o.LogLevel = LogDebug3 })},
		{[]string{"-v", "-v", "-v", "-v", "main"}, opts(func(o *Options) { o.LogLevel = LogDebug3 })},
		{[]string{"-q", "-v", "main"}, opts(func(o *Options) { o.LogLevel = LogDebug1 })},
		{[]string{"-o", "LogLevel=error", "-v", "main"}, opts(func(o *Options) { o.LogLevel = LogDebug1 })},
		{[]string{"-v", "-o", "LogLevel=error", "main"}, opts(func(o *Options) { o.LogLevel = LogDebug1 })},
		{[]string{"-e", "none", "main"}, opts(func(o *Options) { o.EscapeChar = EscapeNone })},
		{[]string{"-e^]", "main"}, opts(func(o *Options) { o.EscapeChar = 0x1d })},
		{[]string{"-e", "a", "-o", "EscapeChar=b", "main"}, opts(func(o *Options) { o.EscapeChar = 'a' })},
		{[]string{"-e", "a", "-e", "b", "main"}, opts(func(o *Options) { o.EscapeChar = 'b' })},
		{[]string{"-N", "main"}, opts(func(o *Options) { o.Session = SessionNone })},
		// -f is -n too, as in ssh.c; ForkAfterAuthentication alone is not.
		{[]string{"-fN", "main"}, opts(func(o *Options) {
			o.ForkAfterAuthentication, o.StdinNull, o.Session = true, true, SessionNone
			o.Other = []Setting{{"forkafterauthentication", "yes"}}
		})},
		{[]string{"-o", "ForkAfterAuthentication=no", "-f", "main", "true"}, opts(func(o *Options) {
			o.ForkAfterAuthentication, o.StdinNull, o.Command = true, true, []string{"true"}
			o.Other = []Setting{{"forkafterauthentication", "yes"}}
		})},
		{[]string{"-f", "-o", "ForkAfterAuthentication=no", "main", "true"}, opts(func(o *Options) {
			o.ForkAfterAuthentication, o.StdinNull, o.Command = true, true, []string{"true"}
			o.Other = []Setting{{"forkafterauthentication", "yes"}}
		})},
		{[]string{"-o", "ForkAfterAuthentication=yes", "-o", "RemoteCommand=true", "main"}, opts(func(o *Options) {
			o.ForkAfterAuthentication, o.RemoteCommand = true, "true"
			o.Other = []Setting{{"forkafterauthentication", "yes"}}
		})},
		{[]string{"-s", "main", "sftp"}, opts(func(o *Options) { o.Session, o.Command = SessionSubsystem, []string{"sftp"} })},
		{[]string{"-o", "HostName=other", "main"}, opts(func(o *Options) { o.HostName = "other" })},
		{[]string{"-o", "RemoteCommand=none", "main"}, opts(func(o *Options) {})},
		{[]string{"-o", "RemoteCommand=echo hi", "main"}, opts(func(o *Options) { o.RemoteCommand = "echo hi" })},
		{[]string{"-o", "IgnoreUnknown=Foo*", "-o", "FooBar=1", "main"}, opts(func(o *Options) {
			o.Other = []Setting{{"ignoreunknown", "Foo*"}}
		})},
		{[]string{"-E", "/tmp/log", "-F", "/dev/null", "main"}, opts(func(o *Options) { o.LogFile = "/tmp/log" })},
		// What scp, sftp, git and rsync pass.
		{[]string{"-x", "-oPermitLocalCommand=no", "-oClearAllForwardings=yes", "-oRemoteCommand=none", "-oRequestTTY=no", "-oForwardAgent=no", "-l", "u", "-s", "--", "main", "sftp"}, opts(func(o *Options) {
			o.User, o.TTY, o.Session, o.Command = "u", TTYNever, SessionSubsystem, []string{"sftp"}
			o.Other = []Setting{{"forwardx11", "no"}, {"permitlocalcommand", "no"}, {"clearallforwardings", "yes"}, {"forwardagent", "no"}}
		})},
		{[]string{"-oForwardX11 no", "-oPermitLocalCommand no", "-oClearAllForwardings yes", "-oForwardAgent no", "-s", "--", "main", "sftp"}, opts(func(o *Options) {
			o.Session, o.Command = SessionSubsystem, []string{"sftp"}
			o.Other = []Setting{{"forwardx11", "no"}, {"permitlocalcommand", "no"}, {"clearallforwardings", "yes"}, {"forwardagent", "no"}}
		})},
		{[]string{"-G", "-o", "SendEnv=GIT_PROTOCOL", "-6", "-p", "2222", "main"}, opts(func(o *Options) {
			o.DumpConfig, o.Port, o.SendEnv = true, "2222", []string{"GIT_PROTOCOL"}
			o.Other = []Setting{{"addressfamily", "inet6"}}
		})},
		{[]string{"main", "rsync", "--server", "-e.LsfxCIvu", ".", "x"}, opts(func(o *Options) {
			o.Command = []string{"rsync", "--server", "-e.LsfxCIvu", ".", "x"}
		})},
	}
	for _, tt := range tests {
		got, err := Parse(tt.args)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.args, err)
			continue
		}
		if diff := cmp.Diff(&tt.want, got, cmpopts.EquateEmpty(), cmpopts.IgnoreUnexported(Options{})); diff != "" {
			t.Errorf("Parse(%q) mismatch (-want +got):\n%s", tt.args, diff)
		}
	}
}

func TestParseVersionStopsParsing(t *testing.T) {
	for _, args := range [][]string{{"-V"}, {"-V", "-Z"}, {"-qV", "-p"}, {"main", "-V"}} {
		o, err := Parse(args)
		if err != nil || !o.Version {
			t.Errorf("Parse(%q) = %+v, %v; want Version", args, o, err)
		}
	}
	if _, err := Parse([]string{"-Z", "-V"}); err == nil {
		t.Errorf("Parse(-Z -V) = nil error; an unknown option before -V is an error, as in ssh")
	}
}

func TestParseErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-T"},
		{"-p"},
		{"-Z", "main"},
		{"-main"},
		{"--", "-x"},
		{"-o", "novalue", "main"},
		{"-o", "=x", "main"},
		{"-o", "Foo=1", "main"},
		{"-o", "Host=x", "main"},
		{"-o", "Match=all", "main"},
		{"-o", "User=a b", "main"},
		{"-o", "User=", "main"},
		{"-o", "RequestTTY=maybe", "main"},
		{"-o", "LogLevel=loud", "main"},
		{"-o", "SessionType=shell", "main"},
		{"-o", "SetEnv=A", "main"},
		{"-o", `SetEnv="A=1`, "main"},
		{"-o", "SendEnv=A=B", "main"},
		{"-o", "ProxyCommand=a\nb", "main"},
		{"-o", "ProxyJump=j", "main"},
		{"-o", "Tunnel=yes", "main"},
		{"-o", "ForkAfterAuthentication=yes", "main"},
		{"-o", "PermitLocalCommand=yes", "main"},
		{"-o", "RemoteCommand=ls", "main", "ls"},
		{"-J", "j", "main"},
		{"-w", "0", "main"},
		{"-O", "check", "main"},
		{"-Q", "cipher"},
		{"-f", "main"},
		{"-f", "-T", "main"},
		{"-o", "ForkAfterAuthentication=maybe", "main", "true"},
		{"-1", "main"},
		{"-p", "0", "main"},
		{"-p", "x", "main"},
		{"-p", "65536", "main"},
		{"-e", "ab", "main"},
		{"-e", " ", "main"},
		{"-s", "main"},
		{"a/b"},
		{"a:b"},
		{"user@"},
		{"@main"},
		{"ssh://main/path"},
		{"main\n"},
		{"-o", "HostName=a b", "main"},
	} {
		_, err := Parse(args)
		if _, ok := errors.AsType[*UsageError](err); !ok {
			t.Errorf("Parse(%q) = %v, want a UsageError", args, err)
			continue
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("Parse(%q): %q is more than one line", args, err)
		}
	}
}

func TestLineJoinsWithSingleSpaces(t *testing.T) {
	o := &Options{Command: []string{"echo", "a  b", "$HOME", "'q'"}}
	if got, want := o.Line(), "echo a  b $HOME 'q'"; got != want {
		t.Errorf("Line() = %q, want %q", got, want)
	}
}

func TestWriteConfig(t *testing.T) {
	o, err := Parse([]string{"-G", "-o", "SendEnv=GIT_PROTOCOL LC_*", "-o", `SetEnv A=1 "B=x y"`, "-p", "2222", "-i", "key", "-e", "^A", "-t", "git@main.cocoonbox"})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := o.WriteConfig(&b); err != nil {
		t.Fatal(err)
	}
	want := `host main.cocoonbox
user git
hostname main
port 2222
identityfile key
requesttty true
sessiontype default
stdinnull no
loglevel INFO
sendenv GIT_PROTOCOL
sendenv LC_*
setenv A=1
setenv "B=x y"
escapechar ^A
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("WriteConfig mismatch (-want +got):\n%s", diff)
	}
}

func TestSplitWords(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"a b\tc", []string{"a", "b", "c"}},
		{`A="x y" 'B=1 2'`, []string{"A=x y", "B=1 2"}},
		{`a\ b c\"d`, []string{"a b", `c"d`}},
		{`""`, []string{""}},
		{`a\b`, []string{`a\b`}},
	}
	for _, tt := range tests {
		got, err := splitWords(tt.in)
		if err != nil {
			t.Errorf("splitWords(%q): %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("splitWords(%q) mismatch (-want +got):\n%s", tt.in, diff)
		}
		for _, w := range got {
			back, err := splitWords(quoteWord(w))
			if err != nil || len(back) != 1 || back[0] != w {
				t.Errorf("splitWords(quoteWord(%q)) = %q, %v", w, back, err)
			}
		}
	}
}

// TestForkMatchesOpenSSH: -f and -o ForkAfterAuthentication are accepted
// or refused as OpenSSH's ssh -G (ssh -F /dev/null) accepts or refuses
// them, and -G prints the same forkafterauthentication, stdinnull and
// sessiontype lines.
func TestForkMatchesOpenSSH(t *testing.T) {
	for _, args := range [][]string{
		{"-f", "x", "true"},
		{"-f", "x"},
		{"-fN", "x"},
		{"-f", "-T", "x"},
		{"-f", "-s", "x", "sftp"},
		{"-f", "-W", "h:22", "x"},
		{"-f", "-o", "RemoteCommand=true", "x"},
		{"-o", "ForkAfterAuthentication=yes", "x", "true"},
		{"-o", "ForkAfterAuthentication=yes", "x"},
		{"-o", "ForkAfterAuthentication=no", "-f", "x", "true"},
		{"-f", "-o", "ForkAfterAuthentication=no", "x", "true"},
		{"-o", "ForkAfterAuthentication=no", "x"},
		{"-o", "StdinNull=no", "-f", "x", "true"},
	} {
		out, err := exec.Command("ssh", append([]string{"-F", "/dev/null", "-G"}, args...)...).Output()
		theirsOK := err == nil
		keep := func(s string) []string {
			var lines []string
			for _, l := range strings.Split(s, "\n") {
				if k, _, _ := strings.Cut(l, " "); k == "forkafterauthentication" || k == "stdinnull" || k == "sessiontype" {
					lines = append(lines, l)
				}
			}
			slices.Sort(lines)
			return lines
		}
		o, perr := Parse(append([]string{"-G"}, args...))
		if oursOK := perr == nil; oursOK != theirsOK {
			t.Errorf("%q: ours %v, OpenSSH's ok=%v", args, perr, theirsOK)
			continue
		}
		if perr != nil {
			continue
		}
		var b strings.Builder
		o.WriteConfig(&b)
		ours, theirs := keep(b.String()), keep(string(out))
		if !strings.Contains(b.String(), "forkafterauthentication") {
			// -G prints only what was given; OpenSSH's default is no.
			ours = append(ours, "forkafterauthentication no")
			slices.Sort(ours)
		}
		if !slices.Equal(ours, theirs) {
			t.Errorf("%q: -G prints %q, OpenSSH %q", args, ours, theirs)
		}
	}
}
