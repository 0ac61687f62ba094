package cli_test

import (
	"os"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"
)

// The curl lines of docs/login.md are the ones login_curl.txtar runs,
// but for the first two, which set the link and the code.
func TestCurlRecipeInDocs(t *testing.T) {
	doc, err := os.ReadFile("../docs/login.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(doc), "#### With curl\n")
	if !ok {
		t.Fatal(`docs/login.md has no "#### With curl"`)
	}
	var docLines []string
	for _, l := range strings.Split(block, "\n") {
		if s, ok := strings.CutPrefix(l, "    "); ok {
			docLines = append(docLines, s)
		} else if len(docLines) > 0 {
			break
		}
	}
	ar, err := txtar.ParseFile("testdata/script/login_curl.txtar")
	if err != nil {
		t.Fatal(err)
	}
	var script []string
	for _, f := range ar.Files {
		if f.Name == "consent.sh" {
			script = strings.Split(strings.TrimSpace(string(f.Data)), "\n")
		}
	}
	if len(docLines) < 3 || len(script) != len(docLines) || strings.Join(docLines[2:], "\n") != strings.Join(script[2:], "\n") {
		t.Errorf("docs/login.md's curl lines:\n%s\nare not login_curl.txtar's consent.sh:\n%s", strings.Join(docLines, "\n"), strings.Join(script, "\n"))
	}
}
