package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEngineSwitchLinesGrammar: the warning of a start that switches
// engines names one box in the singular ("box main finds none of the
// files it made") and several in the plural; it read "the boxes main
// find none of the files they made" for the one box every local box has.
func TestEngineSwitchLinesGrammar(t *testing.T) {
	dir := t.TempDir()
	mk := func(name string) {
		if err := os.MkdirAll(filepath.Join(dir, "boxes", name), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "boxes", name, "box.json"), []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	mk("main")
	if l := engineSwitchLines(dir, "docker"); len(l) != 2 || !strings.HasPrefix(l[0], "cocoonbox: warning: on docker box main finds none of the files it made on the process engine: ") {
		t.Errorf("one box: %q", l)
	}
	mk("dev")
	if l := engineSwitchLines(dir, "docker"); len(l) != 2 || !strings.HasPrefix(l[0], "cocoonbox: warning: on docker the boxes dev, main find none of the files they made on the process engine: ") {
		t.Errorf("two boxes: %q", l)
	}
	if l := engineSwitchLines(dir, "process"); l != nil {
		t.Errorf("no switch: %q", l)
	}
}
