// Package jsonfile reads and writes a JSON document kept whole in one
// file: the records, indexes and reports both halves of offload keep
// (the box's session.json, index.json, env.json and env-report.json, the
// laptop's offload.json and repos.json), and the local box's tokens and
// accounts. A write replaces the file atomically, so a reader sees the old
// document or the new one, never half of one; an Update is a
// read-modify-write under a lock, so writers in other processes each
// keep their change.
package jsonfile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/cocoonbox/cocoonbox/internal/atomicfile"
	"github.com/cocoonbox/cocoonbox/internal/flock"
	"github.com/cocoonbox/cocoonbox/internal/safefile"
)

// MaxSize is the largest document Read reads and Write writes: 64 MiB,
// far beyond any record, index or token list.
const MaxSize = 64 << 20

// Read decodes the file at path into v. ok is false, with no error,
// when there is no such file; a file that does not decode is an error
// that names path. Only a regular file of at most MaxSize bytes is read
// (safefile.ReadRegular): a FIFO, a device or a link to one is refused
// with a *safefile.NotRegularError at once, never waited on or read
// without end.
func Read(path string, v any) (ok bool, err error) {
	b, _, err := safefile.ReadRegular(path, MaxSize)
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
// perm. The directory must exist. A document larger than MaxSize, which
// Read would refuse, is an error and nothing is written.
func Write(path string, v any, perm os.FileMode) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if len(b)+1 > MaxSize {
		return fmt.Errorf("%s: the document would be larger than %s; nothing was written", path, safefile.Size(MaxSize))
	}
	return atomicfile.WriteFile(path, append(b, '\n'), perm)
}

// Update runs f on the document at path under an exclusive flock of the
// file lock (internal/flock; waited for), with what path holds (nil when
// there is no such file), and writes what f returns with mode perm,
// unless f fails or returns nil. It returns what f returned.
func Update[T any](path, lock string, perm os.FileMode, f func(old *T) (*T, error)) (*T, error) {
	return UpdateContext(context.Background(), path, lock, perm, f)
}

// UpdateContext is Update whose wait for the lock ctx ends
// (flock.HoldContext): the error then wraps ctx's, and nothing is
// written.
func UpdateContext[T any](ctx context.Context, path, lock string, perm os.FileMode, f func(old *T) (*T, error)) (*T, error) {
	release, err := flock.HoldContext(ctx, lock, flock.Exclusive)
	if err != nil {
		return nil, err
	}
	defer release()
	var v T
	old := &v
	if ok, err := Read(path, old); err != nil {
		return nil, err
	} else if !ok {
		old = nil
	}
	out, err := f(old)
	if err != nil || out == nil {
		return out, err
	}
	return out, Write(path, out, perm)
}
