package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// delimiterRow is a Markdown table's second line: | --- | :-: |.
var delimiterRow = regexp.MustCompile(`^\|(\s*:?-+:?\s*\|)+\s*$`)

// TestTablesWhole: every table of the docs renders as one: a row after a
// line that is no row starts a table only with a header and a delimiter
// row (a paragraph once sat inside docs/cocoonbox.md's state table, and
// the rows after it were shown as text).
func TestTablesWhole(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	files = append(files, filepath.Join("..", "..", "README.md"))
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		fence := false
		in := false
		for i, l := range lines {
			if strings.HasPrefix(strings.TrimSpace(l), "```") {
				fence = !fence
			}
			if fence || !strings.HasPrefix(l, "|") {
				in = false
				continue
			}
			if !in && (i+1 >= len(lines) || !delimiterRow.MatchString(lines[i+1])) {
				t.Errorf("%s:%d: a table row outside a table (a line that is no row above it, and no header): %.60s", p, i+1, l)
			}
			in = true
		}
	}
}
