package shim

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParse checks that Parse never panics, that it refuses bad input with
// one line, and that whatever it accepts, -G prints back unchanged: the
// values given appear as given, and the printed configuration, read back
// as -o options, gives the same configuration. Arguments are separated by
// NUL bytes in the input.
func FuzzParse(f *testing.F) {
	for _, args := range [][]string{
		{"main"},
		{"-T", "git@main.cocoonbox", "git-upload-pack 'repo'"},
		{"-G", "-o", "SendEnv=GIT_PROTOCOL", "-6", "-p", "2222", "main"},
		{"-x", "-oPermitLocalCommand=no", "-oClearAllForwardings=yes", "-oRemoteCommand=none", "-oRequestTTY=no", "-oForwardAgent=no", "-l", "u", "-s", "--", "main", "sftp"},
		{"-oForwardX11 no", "-s", "--", "main", "sftp"},
		{"-o", `SetEnv A=1 "B=x y"`, "-o", "SendEnv=LC_* -LC_X", "-e", "^]", "-tt", "ssh://u@main:22/", "-q"},
		{"-M", "-S", "/tmp/%C", "-o", "ControlPersist=60", "-i", "k", "-vvv", "main", "--", "-n"},
		{"-o", "IgnoreUnknown=X*", "-o", "Xyz=1", "-o", "HostName=other", "-E", "log", "-N", "main"},
		{"-o", "RemoteCommand=echo hi", "-o", "LogLevel=error", "-e", "none", "main"},
		{"-V"},
		{"-L", "1:x:2", "main"},
	} {
		f.Add(strings.Join(args, "\x00"))
	}
	f.Fuzz(func(t *testing.T, in string) {
		args := strings.Split(in, "\x00")
		o, err := Parse(args)
		if err != nil {
			if _, ok := errors.AsType[*UsageError](err); !ok {
				t.Fatalf("Parse(%q) = %v, not a UsageError", args, err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("Parse(%q): error %q is more than one line", args, err)
			}
			return
		}
		if o.Version {
			return
		}
		dump := config(t, o)
		lines := map[string][]string{}
		for _, l := range strings.Split(strings.TrimSuffix(dump, "\n"), "\n") {
			k, v, ok := strings.Cut(l, " ")
			if !ok {
				t.Fatalf("Parse(%q): -G line %q has no value", args, l)
			}
			lines[k] = append(lines[k], v)
		}
		user, port := o.User, o.Port
		if user == "" {
			user = "user"
		}
		if port == "" {
			port = "22"
		}
		for k, want := range map[string]string{"host": o.Host, "user": user, "hostname": o.Box(), "port": port} {
			if got := lines[k]; len(got) != 1 || got[0] != want {
				t.Fatalf("Parse(%q): -G prints %s %q, want %q", args, k, got, want)
			}
		}
		for _, s := range o.Other {
			if !strings.Contains(dump, s.Key+" "+s.Value+"\n") {
				t.Fatalf("Parse(%q): -G does not print %s %q:\n%s", args, s.Key, s.Value, dump)
			}
		}
		for k, ws := range map[string][]string{"sendenv": o.SendEnv, "setenv": o.SetEnv} {
			if len(lines[k]) != len(ws) {
				t.Fatalf("Parse(%q): -G prints %s %q, want %q", args, k, lines[k], ws)
			}
			for i, w := range ws {
				if got, err := splitWords(lines[k][i]); err != nil || len(got) != 1 || got[0] != w {
					t.Fatalf("Parse(%q): -G prints %s %q, want %q", args, k, lines[k][i], w)
				}
			}
		}

		var again []string
		for _, l := range strings.Split(strings.TrimSuffix(dump, "\n"), "\n") {
			if !strings.HasPrefix(l, "host ") {
				again = append(again, "-o", l)
			}
		}
		again = append(again, o.Host)
		if len(o.Command) > 0 {
			again = append(again, "--")
			again = append(again, o.Command...)
		}
		o2, err := Parse(again)
		if err != nil {
			t.Fatalf("Parse(%q) accepted, but its -G output read back fails: %v\n%s", args, err, dump)
		}
		if dump2 := config(t, o2); dump2 != dump {
			t.Fatalf("Parse(%q): -G output read back prints\n%s\nnot\n%s", args, dump2, dump)
		}
	})
}

func config(t *testing.T, o *Options) string {
	var b strings.Builder
	if err := o.WriteConfig(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
