// Package jsonfile reads and writes a JSON document kept whole in one
// file: the records, indexes and reports both halves of offload keep
// (the box's session.json, index.json, env.json and env-report.json, the
// laptop's offload.json). A write replaces the file atomically, so a
// reader sees the old document or the new one, never half of one.
package jsonfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/cocoonbox/cocoonbox/internal/atomicfile"
)

// Read decodes the file at path into v. ok is false, with no error,
// when there is no such file; a file that does not decode is an error
// that names path.
func Read(path string, v any) (ok bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	return true, nil
}

// Write writes v to path as indented JSON and a newline, through a
// temporary file renamed over path (internal/atomicfile), with mode
// perm. The directory must exist.
func Write(path string, v any, perm os.FileMode) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(b, '\n'), perm)
}
