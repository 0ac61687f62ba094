package shim

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParse(t *testing.T) {
	tests := []struct {
		args []string
		want Options
	}{
		{[]string{"main"}, Options{Box: "main"}},
		{[]string{"main", "echo", "a b"}, Options{Box: "main", Command: []string{"echo", "a b"}}},
		{[]string{"-T", "git@main", "git-upload-pack", "'repo'"}, Options{Box: "main", User: "git", TTY: TTYNever, Command: []string{"git-upload-pack", "'repo'"}}},
		{[]string{"-tt", "main"}, Options{Box: "main", TTY: TTYForced}},
		{[]string{"-t", "-t", "main"}, Options{Box: "main", TTY: TTYForced}},
		{[]string{"-qnT", "main", "ls", "-l"}, Options{Box: "main", Quiet: true, NoStdin: true, TTY: TTYNever, Command: []string{"ls", "-l"}}},
		{[]string{"-oSendEnv=GIT_PROTOCOL", "-o", "SetEnv A=1", "-o", "ControlMaster = auto", "main"}, Options{Box: "main", Config: map[string][]string{
			"sendenv": {"GIT_PROTOCOL"}, "setenv": {"A=1"}, "controlmaster": {"auto"},
		}}},
		{[]string{"-p", "22", "-l", "me", "-i", "key", "-4", "main.cocoonbox"}, Options{Box: "main", User: "me", Port: "22"}},
		{[]string{"-p22", "ssh://u@main:2222", "x"}, Options{Box: "main", User: "u", Port: "2222", Command: []string{"x"}}},
		{[]string{"--", "main", "-n"}, Options{Box: "main", Command: []string{"-n"}}},
		{[]string{"main", "-n"}, Options{Box: "main", Command: []string{"-n"}}},
		{[]string{"-vvv", "main"}, Options{Box: "main", Verbose: 3}},
	}
	for _, tt := range tests {
		got, err := Parse(tt.args)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.args, err)
			continue
		}
		if tt.want.Config == nil {
			tt.want.Config = map[string][]string{}
		}
		if diff := cmp.Diff(&tt.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("Parse(%q) mismatch (-want +got):\n%s", tt.args, diff)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-T"},
		{"-p"},
		{"-Z", "main"},
		{"-o", "novalue", "main"},
		{"a/b"},
		{"user@"},
	} {
		_, err := Parse(args)
		var ue *UsageError
		if !errors.As(err, &ue) {
			t.Errorf("Parse(%q) = %v, want a UsageError", args, err)
		}
	}
}

func TestLineJoinsWithSingleSpaces(t *testing.T) {
	o := &Options{Command: []string{"echo", "a  b", "$HOME", "'q'"}}
	if got, want := o.Line(), "echo a  b $HOME 'q'"; got != want {
		t.Errorf("Line() = %q, want %q", got, want)
	}
}
