package shellquote

import (
	"os/exec"
	"testing"
)

func TestQuote(t *testing.T) {
	for _, tc := range []struct{ in, quote, git, word string }{
		{"", `''`, `''`, `''`},
		{"abc", `'abc'`, `'abc'`, `abc`},
		{"a b'c", `'a b'\''c'`, `'a b'\''c'`, `'a b'\''c'`},
		{"hi!", `'hi!'`, `'hi'\!''`, `'hi!'`},
		{"x=1,y+z@h:/p.q_r-s", `'x=1,y+z@h:/p.q_r-s'`, `'x=1,y+z@h:/p.q_r-s'`, `x=1,y+z@h:/p.q_r-s`},
		{"50%", `'50%'`, `'50%'`, `'50%'`},
	} {
		if got := Quote(tc.in); got != tc.quote {
			t.Errorf("Quote(%q) = %s, want %s", tc.in, got, tc.quote)
		}
		if got := Git(tc.in); got != tc.git {
			t.Errorf("Git(%q) = %s, want %s", tc.in, got, tc.git)
		}
		if got := Word(tc.in); got != tc.word {
			t.Errorf("Word(%q) = %s, want %s", tc.in, got, tc.word)
		}
	}
	if got := WordWith("50%", "%"); got != "50%" {
		t.Errorf("WordWith = %s", got)
	}
}

// TestShell checks that sh gives every quoted word back as it was.
func TestShell(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	for _, s := range []string{"", "a b", "it's", "$HOME `x` \\ \" !", "\n\t*?[a]"} {
		for _, q := range []string{Quote(s), Git(s), Word(s)} {
			out, err := exec.Command(sh, "-c", "printf %s "+q).Output()
			if err != nil || string(out) != s {
				t.Errorf("sh -c 'printf %%s %s' = %q, %v; want %q", q, out, err, s)
			}
		}
	}
}
