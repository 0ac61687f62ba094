package offload

import (
	"testing"
)

var claudeHosts = []string{"claude.ai", "claude.com", "anthropic.com"}

func TestAllowedLink(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"https://claude.ai/oauth/authorize?code=true&client_id=x&state=a%20b", "https://claude.ai/oauth/authorize?code=true&client_id=x&state=a%20b"},
		{"https://platform.claude.com/x", "https://platform.claude.com/x"},
		{"https://CLAUDE.AI/x", ""}, // a host in capitals is not as the vendor prints it
		{"https://claude.ai:443/x", "https://claude.ai:443/x"},
		{"http://claude.ai/x", ""},
		{"https://claude.ai.evil.com/x", ""},
		{"https://evilclaude.ai/x", ""},
		{"https://claude.ai@evil.com/x", ""},
		{"https://user@claude.ai/x", ""},
		{"https://claude.ai:8443/x", ""},
		{"https://claude.ai/x|whoami", ""},
		{"https://claude.ai/x^y", ""},
		{"https://claude.ai/x'y", ""},
		{"https://claude.ai/x\"y", ""},
		{"https://claude.ai/x y", ""},
		{"https://claude.ai/x<y>", ""},
		{"https://xn--claud-gva.ai/x", ""},
		{"https://claude%2eai/x", ""},
		{"javascript:alert(1)", ""},
		{"https://[::1]/x", ""},
	}
	for _, tc := range tests {
		got, ok := AllowedLink(tc.in, claudeHosts)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("AllowedLink(%q) = %q, %v; want %q", tc.in, got, ok, tc.want)
		}
	}
}

func TestLinkFinder(t *testing.T) {
	tests := []struct {
		name   string
		chunks []string
		want   string
	}{
		{"plain", []string{"Open this link:\r\nhttps://claude.ai/oauth?x=1\r\n"}, "https://claude.ai/oauth?x=1"},
		{"split across writes", []string{"go to htt", "ps://clau", "de.ai/a?b=", "c\r\n"}, "https://claude.ai/a?b=c"},
		{"ended by a pipe", []string{"https://claude.ai/x|curl evil\n"}, "https://claude.ai/x"},
		{"ended by a caret", []string{"https://claude.ai/x^%PATH%\n"}, "https://claude.ai/x"},
		{"ended by a quote", []string{"'https://claude.ai/x'\n"}, "https://claude.ai/x"},
		{"ended by an escape", []string{"\x1b[4mhttps://claude.ai/x\x1b[0m"}, "https://claude.ai/x"},
		{"a sentence's full stop", []string{"Visit https://claude.ai/x.\n"}, "https://claude.ai/x"},
		{"look-alike first, then the vendor", []string{"https://claude.ai.evil.com/x https://claude.ai/real\n"}, "https://claude.ai/real"},
		{"userinfo skipped", []string{"https://claude.ai@evil.com/ then https://claude.com/ok\n"}, "https://claude.com/ok"},
		{"not finished yet", []string{"https://claude.ai/x"}, ""},
		{"OSC 8 with BEL", []string{"\x1b]8;;https://claude.ai/osc\aclick here\x1b]8;;\a\n"}, "https://claude.ai/osc"},
		{"OSC 8 with ST, split", []string{"\x1b]8;id=1;https://clau", "de.com/st\x1b\\text\x1b]8;;\x1b\\\n"}, "https://claude.com/st"},
		{"OSC 8 target with a pipe is skipped whole", []string{"\x1b]8;;https://claude.ai/x|evil\aclick\x1b]8;;\a then https://claude.ai/next\n"}, "https://claude.ai/next"},
		{"OSC 8 target with a quote is skipped whole", []string{"\x1b]8;;https://claude.ai/x'y\aclick\x1b]8;;\a\n"}, ""},
		{"OSC 8 to a look-alike is skipped", []string{"\x1b]8;;https://claude.ai.evil.com/\ahttps-ish text\x1b]8;;\a\n"}, ""},
		{"the first link wins", []string{"https://claude.ai/first\nhttps://claude.ai/second\n"}, "https://claude.ai/first"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &LinkFinder{Hosts: claudeHosts}
			for _, c := range tc.chunks {
				f.Write([]byte(c))
			}
			if got := f.Found(); got != tc.want {
				t.Errorf("found %q, want %q", got, tc.want)
			}
		})
	}
}
