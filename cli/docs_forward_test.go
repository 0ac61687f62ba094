package cli_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// forwardSpec is an -L PORT:HOST:HOSTPORT (with an optional bind address)
// in a command line.
var forwardSpec = regexp.MustCompile(`-L\s+(?:[^\s:]+:)?(\d+):(localhost|127\.0\.0\.1|\[::1\]):(\d+)\b`)

// TestDocsForwardExamples: a -L example to a box forwards between two
// different ports, since a local box's loopback is this machine's, where
// the box's server already holds the port (`ssh -L 8080:localhost:8080
// main.cocoonbox` fails to listen). Forwards to a server that is not a
// box (docs/self-hosting.md) may keep one port.
func TestDocsForwardExamples(t *testing.T) {
	files, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, f := range append(files, "../README.md") {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// Markdown wraps a code span over lines: join them.
		text := strings.Join(strings.Fields(string(b)), " ")
		for _, m := range forwardSpec.FindAllStringSubmatchIndex(text, -1) {
			rest := text[m[1]:min(len(text), m[1]+40)]
			if !strings.Contains(rest, ".cocoonbox") && !strings.Contains(rest, " main") {
				continue
			}
			seen++
			if port, hostport := text[m[2]:m[3]], text[m[6]:m[7]]; port == hostport {
				t.Errorf("%s: %q forwards this machine's port %s to the box's %s: a local box's is the same port", filepath.Base(f), text[m[0]:m[1]], port, hostport)
			}
		}
	}
	if seen == 0 {
		t.Error("no -L example to a box in docs: the pattern no longer matches them")
	}
}
