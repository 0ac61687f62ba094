package localbox

import (
	"errors"
	"fmt"
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

// The guess limit holds past the table of sources: a source that used
// its guesses up is never forgotten while it has none back, however many
// others guess, and the wrong guesses let through from more sources than
// the table holds are bounded. Forgetting any source once the table was
// full gave it, and every source after it, its guesses back: 16 million
// loopback addresses (each its own source) guessed without limit.
func TestGuessLimitPastTable(t *testing.T) {
	o, err := newOwner(t.TempDir(), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	none := func(string) (string, bool) { return "", false }
	guess := func(source string) bool {
		_, err := o.signIn("WRONG-WRONG", source, none)
		return errors.Is(err, errWrongCode)
	}
	for range guessBurst {
		guess("192.0.2.1")
	}
	through := 0
	for round := range 3 {
		for i := range maxGuessSources {
			src := fmt.Sprintf("10.%d.%d.%d", round, i>>8, i&0xff)
			for range guessBurst {
				if guess(src) {
					through++
				}
			}
		}
		if guess("192.0.2.1") {
			t.Fatalf("round %d: a source past its limit guessed again once %d others had guessed", round, (round+1)*maxGuessSources)
		}
	}
	if max := maxGuessSources*guessBurst + guessBurst; through > max {
		t.Errorf("%d wrong guesses from %d sources went through; want at most %d", through, 3*maxGuessSources, max)
	}
}
