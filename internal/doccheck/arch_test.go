package doccheck

import (
	"bufio"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// pkgImports is what one package of the module imports of the module's
// other packages, by their paths relative to the module's root.
type pkgImports struct {
	// code is its non-test files' imports, the files of every platform
	// together; tests is its test files' (internal and external tests).
	code, tests map[string]bool
}

// TestArchitectureTable: docs/architecture.md's table names every
// package of the module, once, and each row's imports are exactly what
// the package's files import of ours; read from the top, each package
// imports only packages below it.
func TestArchitectureTable(t *testing.T) {
	root := filepath.Join("..", "..")
	pkgs := modulePackages(t, root)
	rows, order := architectureTable(t, filepath.Join(root, "docs", "architecture.md"))
	for p := range pkgs {
		if _, ok := rows[p]; !ok {
			t.Errorf("docs/architecture.md: no row for package %s", p)
		}
	}
	for _, p := range order {
		imp, ok := pkgs[p]
		if !ok {
			t.Errorf("docs/architecture.md: a row for %s, which is no package", p)
			continue
		}
		if got, want := sorted(imp.code), sorted(rows[p]); !slices.Equal(got, want) {
			t.Errorf("docs/architecture.md: %s imports %s; its row says %s", p, list(got), list(want))
		}
		below := order[slices.Index(order, p)+1:]
		for _, q := range sorted(imp.code) {
			if !slices.Contains(below, q) {
				t.Errorf("docs/architecture.md: %s imports %s, which its row is not above: an arrow points up, or the rows are out of order", p, q)
			}
		}
	}
}

// TestNoImportUp: no import of ours points up, tests' included:
// internal/ imports nothing of ours outside internal/ and proto/, and
// nothing but the mains of cmd/ (and cli's own tests) imports cli.
func TestNoImportUp(t *testing.T) {
	for p, imp := range modulePackages(t, filepath.Join("..", "..")) {
		for _, set := range []map[string]bool{imp.code, imp.tests} {
			for q := range set {
				if strings.HasPrefix(p, "internal/") && !strings.HasPrefix(q, "internal/") && !strings.HasPrefix(q, "proto/") {
					t.Errorf("%s imports %s: internal/ imports nothing of ours outside internal/ and proto/", p, q)
				}
				if q == "cli" && p != "cli" && !strings.HasPrefix(p, "cmd/") {
					t.Errorf("%s imports cli: only the mains of cmd/ do", p)
				}
			}
		}
	}
}

// modulePackages is every package of the module under root (a directory
// with .go files, outside testdata and hidden directories) and its
// imports of ours, read from the import lines of all its files.
func modulePackages(t *testing.T, root string) map[string]pkgImports {
	t.Helper()
	mod := modulePath(t, root)
	pkgs := map[string]pkgImports{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		imp, ok := pkgs[rel]
		if !ok {
			imp = pkgImports{code: map[string]bool{}, tests: map[string]bool{}}
			pkgs[rel] = imp
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		into := imp.code
		if strings.HasSuffix(p, "_test.go") {
			into = imp.tests
		}
		for _, is := range f.Imports {
			path, err := strconv.Unquote(is.Path.Value)
			if err != nil {
				return err
			}
			if q, ok := strings.CutPrefix(path, mod+"/"); ok && q != rel {
				into[q] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 5 {
		t.Fatalf("found only %d packages under %s", len(pkgs), root)
	}
	return pkgs
}

// modulePath is the module line of root/go.mod.
func modulePath(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.Lines(string(b)) {
		if m, ok := strings.CutPrefix(strings.TrimSpace(l), "module "); ok {
			return strings.TrimSpace(m)
		}
	}
	t.Fatal("go.mod has no module line")
	return ""
}

// tableRow is a row of the package table: `PKG` | what it owns | `IMPORT`, … or —.
var tableRow = regexp.MustCompile("^\\| `([^`]+)` \\| .* \\| ((?:`[^`]+`(?:, )?)+|—) \\|$")

// architectureTable reads the package table of the page at path (the
// rows under the header "| package | owns | imports (of ours) |"): each
// package's imports, and the packages in the table's order.
func architectureTable(t *testing.T, path string) (map[string]map[string]bool, []string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := map[string]map[string]bool{}
	var order []string
	in := false
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		switch {
		case l == "| package | owns | imports (of ours) |":
			in = true
		case !in || strings.HasPrefix(l, "| ---"):
		case !strings.HasPrefix(l, "|"):
			in = false
		default:
			m := tableRow.FindStringSubmatch(l)
			if m == nil {
				t.Errorf("%s:%d: a row of the package table not as `PKG` | owns | `IMPORT`, … (or —): %s", path, n, l)
				continue
			}
			if _, dup := rows[m[1]]; dup {
				t.Errorf("%s:%d: a second row for %s", path, n, m[1])
			}
			imps := map[string]bool{}
			if m[2] != "—" {
				for _, q := range strings.Split(m[2], ", ") {
					imps[strings.Trim(q, "`")] = true
				}
			}
			rows[m[1]] = imps
			order = append(order, m[1])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(order) == 0 {
		t.Fatalf("%s has no package table (the header | package | owns | imports (of ours) |)", path)
	}
	return rows, order
}

func sorted(set map[string]bool) []string {
	var s []string
	for k := range set {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}

func list(s []string) string {
	if len(s) == 0 {
		return "nothing of ours"
	}
	return strings.Join(s, ", ")
}
