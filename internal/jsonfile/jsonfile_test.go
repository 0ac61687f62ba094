package jsonfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadWrite(t *testing.T) {
	p := filepath.Join(t.TempDir(), "r.json")
	var v map[string]int
	if ok, err := Read(p, &v); ok || err != nil {
		t.Fatalf("no file: %v, %v", ok, err)
	}
	if err := Write(p, map[string]int{"a": 1}, 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "{\n  \"a\": 1\n}\n" {
		t.Errorf("wrote %q", b)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, %v", fi.Mode(), err)
	}
	if ok, err := Read(p, &v); !ok || err != nil || v["a"] != 1 {
		t.Errorf("read %v: %v, %v", v, ok, err)
	}
	os.WriteFile(p, []byte("not json"), 0o600)
	if _, err := Read(p, &v); err == nil || !strings.HasPrefix(err.Error(), p+": ") {
		t.Errorf("not JSON: %v", err)
	}
}
