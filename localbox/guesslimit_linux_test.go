package localbox_test

import (
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cocoonbox/cocoonbox/localbox"
)

// Another user of this machine (a box's) brings wrong sign-in codes from
// loopback until it is refused. Before, every loopback connection was
// one source, so the owner's browser then got 429 for the right code,
// for 5 minutes and again after each wrong code every 5 minutes. Now
// loopback counts by the user whose socket connects: that user is
// refused, the right code too (its codes are no longer compared), and
// the owner signs in.
func TestSignInGuessLimitByUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("acting as a second user of this machine takes root")
	}
	u, err := user.Lookup(localbox.DefaultUser)
	if err != nil {
		t.Fatalf("%v (scripts/deps.sh test makes it)", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatalf("%v (scripts/deps.sh test installs it)", err)
	}
	base, dir := serve(t)
	code, err := localbox.SignInCode(dir)
	if err != nil {
		t.Fatal(err)
	}
	// asBoxUser posts code to the sign-in route from a process of the
	// box user's, and returns the status.
	asBoxUser := func(code string) int {
		t.Helper()
		cmd := exec.Command(curl, "-sS", "--max-time", "60", "--noproxy", "*", "-o", "/dev/null", "-w", "%{http_code}",
			"-H", "Content-Type: application/json", "--data", `{"code":"`+code+`"}`, base+"/cb/api/session")
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		out, err := cmd.Output()
		st, cerr := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil || cerr != nil {
			t.Fatalf("curl as %s: %v, %q", u.Username, err, out)
		}
		return st
	}
	for i := range 6 {
		want := http.StatusUnauthorized
		if i == 5 {
			want = http.StatusTooManyRequests
		}
		if st := asBoxUser("AAAAA-AAAAA"); st != want {
			t.Fatalf("wrong code %d from %s: %d; want %d", i+1, u.Username, st, want)
		}
	}
	if st := asBoxUser(code); st != http.StatusTooManyRequests {
		t.Fatalf("the right code from %s past its limit: %d; want 429, not compared", u.Username, st)
	}
	if st, after, d := sessionFrom(t, base, nil, code); st != http.StatusOK {
		t.Fatalf("the owner's right code, after %s's wrong ones: %d, Retry-After %q, %q; want 200", u.Username, st, after, d)
	}
}
