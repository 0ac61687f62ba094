package cli

import "testing"

func TestSSHSoftwareVersion(t *testing.T) {
	for v, want := range map[string]string{
		"(devel)":                         "cocoonbox_(devel)",
		"v1.2.0":                          "cocoonbox_1.2.0",
		"v1.2.0-rc.1":                     "cocoonbox_1.2.0_rc.1",
		"v0.0.0-20261201-abcdef dirty\tü": "cocoonbox_0.0.0_20261201_abcdef_dirty__",
	} {
		if got := sshSoftwareVersion(v); got != want {
			t.Errorf("sshSoftwareVersion(%q) = %q, want %q", v, got, want)
		}
	}
}

func TestParseStdio(t *testing.T) {
	for _, tt := range []struct {
		args []string
		box  string // "" for an error
	}{
		{[]string{"main"}, "main"},
		{[]string{"main.cocoonbox"}, "main"},
		{[]string{"--suffix", ".box", "main.box"}, "main"},
		{[]string{"--suffix=.box", "-v", "main.cocoonbox"}, "main.cocoonbox"},
		{[]string{"--suffix", "", "main.cocoonbox"}, "main.cocoonbox"},
		{[]string{".cocoonbox"}, ""},
		{[]string{"user@main"}, ""},
		{[]string{"main:22"}, ""},
		{[]string{"--suffix", "box", "main.box"}, ""},
		{[]string{}, ""},
		{[]string{"a", "b"}, ""},
	} {
		o, err := parseStdio(tt.args)
		switch {
		case tt.box == "" && err == nil:
			t.Errorf("parseStdio(%q) = %+v, want an error", tt.args, o)
		case tt.box != "" && (err != nil || o.Box != tt.box):
			t.Errorf("parseStdio(%q) = %+v, %v; want box %q", tt.args, o, err, tt.box)
		}
	}
}
