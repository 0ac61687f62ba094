package localbox

import "testing"

// A rule's name covers the name and its subdomains, never a name that
// only ends with it; an address or CIDR entry covers addresses only.
func TestEgressMatchHost(t *testing.T) {
	entries := []string{"example.com", "*.example.org", "10.1.0.0/16", "127.0.0.2"}
	for host, want := range map[string]bool{
		"example.com":       true,
		"API.Example.com.":  true,
		"badexample.com":    false,
		"example.org":       true,
		"a.b.example.org":   true,
		"10.1.2.3":          true,
		"10.2.0.1":          false,
		"127.0.0.2":         true,
		"[::ffff:10.1.0.9]": true,
		"10.1.example.com":  true,
		"other.test":        false,
	} {
		if got := matchHost(entries, host); got != want {
			t.Errorf("matchHost(%q) = %v, want %v", host, got, want)
		}
	}
	for _, bad := range []string{"", "a b", "http://example.com", "example.com:443", "*"} {
		if CheckEgressHost(bad) == nil {
			t.Errorf("CheckEgressHost(%q) took it", bad)
		}
	}
}
