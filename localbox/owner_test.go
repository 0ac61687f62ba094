package localbox

import (
	"errors"
	"testing"
)

// An account's code is under the same guess limit as the owner's: past
// it, a source's right account code is refused unread, and wrong guesses
// never replace the owner's code.
func TestAccountCodeUnderGuessLimit(t *testing.T) {
	o, err := newOwner(t.TempDir(), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	code := o.code
	asked := 0
	accountCode := func(c string) (string, bool) {
		asked++
		return "alice", c == "ALICE-CODE"
	}
	for i := range guessBurst {
		if _, err := o.signIn("WRONG-WRONG", "192.0.2.1", accountCode); !errors.Is(err, errWrongCode) {
			t.Fatalf("wrong guess %d: %v", i+1, err)
		}
	}
	asked = 0
	_, err = o.signIn("ALICE-CODE", "192.0.2.1", accountCode)
	if _, ok := errors.AsType[*guessLimitError](err); !ok || asked != 0 {
		t.Errorf("past the limit, an account's code: %v, its check asked %d times; want a guessLimitError, unasked", err, asked)
	}
	s, err := o.signIn("ALICE-CODE", "192.0.2.2", accountCode)
	if err != nil {
		t.Fatalf("another source's account code: %v", err)
	}
	if a, ok := o.sessionAccount(s); !ok || a != "alice" {
		t.Errorf("the session is of %q (%v), want alice's", a, ok)
	}
	if o.code != code {
		t.Errorf("wrong guesses replaced the owner's code")
	}
}
