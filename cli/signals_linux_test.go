package cli_test

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// sigIgnVar makes TestChildrenGetDefaultSignals the check run inside a
// test binary started with INT, QUIT and HUP ignored.
const sigIgnVar = "COCOONBOX_TEST_SIGIGN"

// ignoredOf is the INT, QUIT and HUP bits of the SigIgn mask (/proc) of a
// shell the test process starts: 0 when all three are at their defaults.
func ignoredOf(t *testing.T, cmd *exec.Cmd) uint64 {
	t.Helper()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %v", cmd.Args, err)
	}
	hex, ok := strings.CutPrefix(strings.TrimSpace(string(out)), "SigIgn:")
	mask, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
	if !ok || err != nil {
		t.Fatalf("%v printed %q", cmd.Args, out)
	}
	return mask & (1<<(1-1) | 1<<(2-1) | 1<<(3-1)) // HUP 1, INT 2, QUIT 3
}

const showSigIgn = `grep '^SigIgn:' /proc/$$/status`

// TestChildrenGetDefaultSignals: a test binary started with INT, QUIT and
// HUP ignored (a background job of a non-interactive shell, nohup) starts
// its children with them at their defaults (takeIgnoredSignals), so that
// the signal tests do not depend on how the suite was started.
func TestChildrenGetDefaultSignals(t *testing.T) {
	if os.Getenv(sigIgnVar) != "" {
		if m := ignoredOf(t, exec.Command("sh", "-c", showSigIgn)); m != 0 {
			t.Errorf("a child of the test binary has SigIgn bits %#x of HUP, INT and QUIT set", m)
		}
		return
	}
	// Without the test binary between them, the ignores reach a grandchild:
	// else this test shows nothing.
	if m := ignoredOf(t, exec.Command("sh", "-c", `trap "" INT QUIT HUP; sh -c "$0"`, showSigIgn)); m != 7 {
		t.Fatalf("through two shells, SigIgn bits %#x, want 0x7", m)
	}
	c := exec.Command("sh", "-c", `trap "" INT QUIT HUP; exec "$0" -test.run '^TestChildrenGetDefaultSignals$' -test.v`, os.Args[0])
	c.Env = append(os.Environ(), sigIgnVar+"=1")
	out, err := c.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestChildrenGetDefaultSignals") {
		t.Errorf("the test binary started with INT, QUIT and HUP ignored: %v\n%s", err, out)
	}
}
