// Package doccheck holds the tests that keep the project's docs true:
// every package has a package comment, every main a command comment, and
// every exported identifier a doc comment (STYLE.md section 6); no file
// holds a merge's conflict markers; and docs/architecture.md's package
// table names every package and its imports, none of them pointing up
// (arch_test.go).
package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

func TestDocComments(t *testing.T) {
	root := filepath.Join("..", "..")
	dirs := map[string][]string{} // the Go files of each directory
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && p != root {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") && !strings.HasSuffix(p, ".pb.go") {
			dirs[filepath.Dir(p)] = append(dirs[filepath.Dir(p)], p)
		}
		return nil
	})
	if len(dirs) < 5 {
		t.Fatalf("found only %d package directories under %s", len(dirs), root)
	}
	for dir, files := range dirs {
		fset := token.NewFileSet()
		hasDoc := map[string]bool{} // by package name
		for _, p := range files {
			f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			hasDoc[f.Name.Name] = hasDoc[f.Name.Name] || f.Doc != nil
			checkFile(t, fset, f)
		}
		for name, ok := range hasDoc {
			if !ok {
				t.Errorf("%s: package %s has no package comment", dir, name)
			}
		}
	}
}

func checkFile(t *testing.T, fset *token.FileSet, f *ast.File) {
	t.Helper()
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Name.IsExported() && d.Doc == nil && (d.Recv == nil || exportedRecv(d.Recv)) && !isInterfaceMethodImpl(d) {
				t.Errorf("%s: %s has no doc comment", fset.Position(d.Pos()), d.Name.Name)
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() && s.Doc == nil && d.Doc == nil {
						t.Errorf("%s: type %s has no doc comment", fset.Position(s.Pos()), s.Name.Name)
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() && s.Doc == nil && d.Doc == nil {
							t.Errorf("%s: %s has no doc comment", fset.Position(n.Pos()), n.Name)
						}
					}
				}
			}
		}
	}
}

func exportedRecv(fl *ast.FieldList) bool {
	t := fl.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if g, ok := t.(*ast.IndexExpr); ok {
		t = g.X
	}
	id, ok := t.(*ast.Ident)
	return ok && id.IsExported()
}

// isInterfaceMethodImpl spares the methods that satisfy a standard
// interface, whose contract is the interface's doc.
func isInterfaceMethodImpl(d *ast.FuncDecl) bool {
	switch d.Name.Name {
	case "Error", "Unwrap", "String", "Read", "Write", "Close":
		return d.Recv != nil
	}
	return false
}
