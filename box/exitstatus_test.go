package box

import "testing"

func TestExitStatusText(t *testing.T) {
	for _, tc := range []struct {
		st   ExitStatus
		want string
	}{
		{ExitStatus{}, "exit status 0"},
		{ExitStatus{Code: 42}, "exit status 42"},
		{ExitStatus{Signal: "KILL"}, "killed by SIGKILL"},
		{ExitStatus{Error: "no shell", Signal: "KILL"}, "no shell"},
	} {
		if got := tc.st.Text(); got != tc.want {
			t.Errorf("%+v.Text() = %q, want %q", tc.st, got, tc.want)
		}
	}
}
