package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestPrintListJSON: the list commands' --json (boxes list, devices,
// localbox account list) write a name the server chose, here with a C1
// CSI, a right-to-left override and a line separator, as \u escapes: one
// line per item that reads back as the same value, and nothing raw for
// the terminal.
func TestPrintListJSON(t *testing.T) {
	name := "dev\u009b2J\u202e\u2028"
	var b strings.Builder
	err := printList(&b, true, []string{name, "plain"}, func(s string) map[string]any { return map[string]any{"name": s} }, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"dev\u009b2J\u202e\u2028"}` + "\n" + `{"name":"plain"}` + "\n"
	if b.String() != want {
		t.Errorf("printList wrote %q, want %q", b.String(), want)
	}
	var back map[string]string
	if err := json.Unmarshal([]byte(strings.SplitN(b.String(), "\n", 2)[0]), &back); err != nil || back["name"] != name {
		t.Errorf("read back %q, %v", back["name"], err)
	}
}
