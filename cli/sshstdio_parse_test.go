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

// TestSSHConfigAdvice: the fix a broken pin's line names is the
// ssh-config command line of this block: its suffix when not the default
// and the ProxyCommand's own path, quoted for the shell; so that pasting
// it cannot turn a *.box block into *.cocoonbox.
func TestSSHConfigAdvice(t *testing.T) {
	for _, tt := range []struct{ suffix, self, want string }{
		{".cocoonbox", "/usr/local/bin/cocoonbox-ssh", "cocoonbox ssh-config --ssh-path /usr/local/bin/cocoonbox-ssh"},
		{".box", "/usr/local/bin/cocoonbox-ssh", "cocoonbox ssh-config --suffix .box --ssh-path /usr/local/bin/cocoonbox-ssh"},
		{".box", "/opt/my tools/it's/cocoonbox-ssh", `cocoonbox ssh-config --suffix .box --ssh-path '/opt/my tools/it'\''s/cocoonbox-ssh'`},
		{".cocoonbox", "cocoonbox-ssh", "cocoonbox ssh-config"},
	} {
		if got := sshConfigAdvice(tt.suffix, tt.self); got != tt.want {
			t.Errorf("sshConfigAdvice(%q, %q) = %q, want %q", tt.suffix, tt.self, got, tt.want)
		}
	}
}
