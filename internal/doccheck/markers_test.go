package doccheck

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoConflictMarkers: no doc, source or script of the tree holds a
// line of a merge conflict's markers, which a merge resolved in a hurry
// can leave in a file git did not stop at (a doc table, once).
func TestNoConflictMarkers(t *testing.T) {
	root := filepath.Join("..", "..")
	exts := map[string]bool{".md": true, ".go": true, ".txtar": true, ".sh": true, ".yml": true, ".yaml": true, "": true}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != root && (strings.HasPrefix(n, ".") && n != ".ci" && n != ".github" || n == "dist" || n == "bin" || n == "man") {
				return filepath.SkipDir
			}
			return nil
		}
		if !exts[filepath.Ext(p)] || !d.Type().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for n := 1; sc.Scan(); n++ {
			l := sc.Text()
			if strings.HasPrefix(l, "<<<<<<< ") || strings.HasPrefix(l, ">>>>>>> ") {
				t.Errorf("%s:%d: a merge conflict's marker: %s", p, n, l)
			}
		}
		return nil
	})
}
