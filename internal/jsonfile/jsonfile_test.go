package jsonfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
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

// Update sees no document at first, writes nothing when f returns nil or
// fails, and keeps every change of updates that run at once (each under
// the lock, as processes of their own would be: a flock belongs to the
// open file).
func TestUpdate(t *testing.T) {
	dir := t.TempDir()
	p, lock := filepath.Join(dir, "n.json"), filepath.Join(dir, "n.lock")
	if _, err := Update(p, lock, 0o600, func(old *int) (*int, error) {
		if old != nil {
			t.Errorf("old = %d, want nil", *old)
		}
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatalf("f returned nil, yet %s: %v", p, err)
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if _, err := Update(p, lock, 0o600, func(old *int) (*int, error) {
				n := 1
				if old != nil {
					n += *old
				}
				return &n, nil
			}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if _, err := Update(p, lock, 0o600, func(old *int) (*int, error) {
		*old = -1
		return old, errors.New("refused")
	}); err == nil || err.Error() != "refused" {
		t.Fatalf("f's error: %v", err)
	}
	var n int
	if ok, err := Read(p, &n); !ok || err != nil || n != 20 {
		t.Fatalf("after 20 updates and a refused one: %d, %v, %v", n, ok, err)
	}
}
