package localbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/cocoonbox/cocoonbox/internal/atomicfile"
	"github.com/cocoonbox/cocoonbox/internal/flock"
)

// readJSONFile reads the JSON file path into a T; a missing file is T's zero
// value.
func readJSONFile[T any](path string) (T, error) {
	var v T
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return v, nil
	}
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("read %s: %w", path, err)
	}
	return v, nil
}

// updateJSONFile applies mutate to the JSON file path under an flock of
// path.lock and, unless mutate fails, writes it atomically (0600); it
// returns what it wrote. Every change to the state's JSON files is such a
// read-modify-write, so the server and the admin commands in another
// process can change them at once.
func updateJSONFile[T any](path string, mutate func(*T) error) (T, error) {
	var zero T
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return zero, err
	}
	defer lock.Close()
	if err := flock.Lock(lock, flock.Exclusive); err != nil {
		return zero, fmt.Errorf("lock %s: %w", path, err)
	}
	defer flock.Unlock(lock)
	v, err := readJSONFile[T](path)
	if err != nil {
		return v, err
	}
	if err := mutate(&v); err != nil {
		return v, err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return v, err
	}
	return v, atomicfile.WriteFile(path, append(b, '\n'), 0o600)
}
