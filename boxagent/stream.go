package boxagent

import (
	"github.com/cocoonbox/cocoonbox/handover"
	"sync"

	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// Size limits of the send stream's members, in bytes.
const (
	maxEnvJSON     = 1 << 20
	maxHEAD        = 4 << 10
	maxIndex       = 1 << 30
	maxSecret      = 1 << 20
	maxSecretTotal = 60 << 20
)

// stream is what a send stream carried. Files are in stage/, secrets in
// the secrets directory being filled.
type stream struct {
	Handover []byte
	EnvJSON  []byte
	Bundle   string // path in stage/, "" when absent
	HEAD     []byte // a linked worktree's HEAD, nil when absent
	Index    string // a linked worktree's index in stage/, "" when absent
	Secrets  []string
}

// StreamError is a send stream the box refuses: a member that is not a
// regular file, a name not in the contract's table, a duplicate, or one
// over its size limit. Nothing of it is kept.
type StreamError struct {
	Member string
	Reason string
}

func (e *StreamError) Error() string {
	if e.Member == "" {
		return "send stream: " + e.Reason
	}
	return fmt.Sprintf("send stream: member %q: %s", e.Member, e.Reason)
}

var (
	secretRE = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^(aws|kube|gcloud|ssh:[A-Za-z0-9][A-Za-z0-9._-]{0,99}|file:.+)$`)
	})
	typeNames = map[byte]string{
		tar.TypeLink: "a hard link", tar.TypeSymlink: "a symlink", tar.TypeChar: "a character device",
		tar.TypeBlock: "a block device", tar.TypeDir: "a directory", tar.TypeFifo: "a fifo",
		tar.TypeCont: "a contiguous file", tar.TypeGNUSparse: "a sparse file",
	}
)

// secretFile is the name a secret entry has in the secrets directory: one
// path element, short enough for any file system (a file: entry's path may
// be long, so it is named by its hash).
func secretFile(entry string) string {
	if strings.HasPrefix(entry, "file:") {
		sum := sha256.Sum256([]byte(entry))
		return "file-" + hex.EncodeToString(sum[:16])
	}
	return entry
}

// secretRepoPath returns the repository path of a file: entry, and
// whether the entry is one and the path is clean and inside the repo.
func secretRepoPath(entry string) (string, bool) {
	p, ok := strings.CutPrefix(entry, "file:")
	if !ok {
		return "", false
	}
	if p == "" || path.IsAbs(p) || path.Clean(p) != p || p == "." || strings.HasPrefix(p, "../") || p == ".." || strings.Contains(p, "\x00") {
		return "", false
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".git" || el == ".." {
			return "", false
		}
	}
	return p, true
}

// readStream reads a send stream: a tar (ustar or pax) of regular files,
// in order. Files go to stage, secrets straight to secrets (0600 files in a
// 0700 directory). Any other member is refused with a *StreamError, and
// nothing is written outside those two directories.
func readStream(r io.Reader, stage, secrets string) (*stream, error) {
	tr := tar.NewReader(r)
	s := &stream{}
	seen := map[string]bool{}
	secretTotal := int64(0)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, tar.ErrInsecurePath) && h != nil {
			return nil, &StreamError{Member: h.Name, Reason: "is not a member of the send stream (handover.md, env.json, offload.bundle, HEAD, index, secrets/<entry>)"}
		}
		if err != nil {
			// Less than a header before the end is no tar at all; a stream
			// cut later is a transfer that failed.
			if errors.Is(err, tar.ErrHeader) || (len(seen) == 0 && errors.Is(err, io.ErrUnexpectedEOF)) {
				return nil, &StreamError{Reason: "not a valid tar (ustar or pax): " + err.Error()}
			}
			return nil, fmt.Errorf("send stream: %w", err)
		}
		name := h.Name
		if h.Typeflag != tar.TypeReg {
			what := typeNames[h.Typeflag]
			if what == "" {
				what = fmt.Sprintf("type %q", h.Typeflag)
			}
			return nil, &StreamError{Member: name, Reason: "is " + what + "; the stream carries regular files only"}
		}
		if h.Format&(tar.FormatUSTAR|tar.FormatPAX) == 0 {
			return nil, &StreamError{Member: name, Reason: "is in " + h.Format.String() + " format; send ustar or pax"}
		}
		if seen[name] {
			return nil, &StreamError{Member: name, Reason: "appears twice"}
		}
		seen[name] = true
		switch {
		case name == "handover.md", name == "env.json":
			dst, limit := &s.Handover, int64(handover.Max)
			if name == "env.json" {
				dst, limit = &s.EnvJSON, maxEnvJSON
			}
			b, err := readLimited(tr, name, h.Size, limit)
			if err != nil {
				return nil, err
			}
			*dst = b
			if err := os.WriteFile(filepath.Join(stage, name), b, 0o600); err != nil {
				return nil, err
			}
		case name == "HEAD":
			b, err := readLimited(tr, name, h.Size, maxHEAD)
			if err != nil {
				return nil, err
			}
			s.HEAD = b
		case name == "offload.bundle", name == "index":
			if name == "index" && h.Size > maxIndex {
				return nil, &StreamError{Member: name, Reason: "is over its size limit"}
			}
			p := filepath.Join(stage, name)
			if err := copyFile(p, tr, 0o600); err != nil {
				return nil, err
			}
			if name == "index" {
				s.Index = p
			} else {
				s.Bundle = p
			}
		case strings.HasPrefix(name, "secrets/"):
			entry := strings.TrimPrefix(name, "secrets/")
			if !secretRE().MatchString(entry) {
				return nil, &StreamError{Member: name, Reason: "is not a secret entry (aws, kube, gcloud, ssh:<key>, file:<repo path>)"}
			}
			if strings.HasPrefix(entry, "file:") {
				if _, ok := secretRepoPath(entry); !ok {
					return nil, &StreamError{Member: name, Reason: "names a path outside the repository"}
				}
			}
			secretTotal += h.Size
			if h.Size > maxSecret || secretTotal > maxSecretTotal {
				return nil, &StreamError{Member: name, Reason: "is over the secrets' size limit"}
			}
			b, err := readLimited(tr, name, h.Size, maxSecret)
			if err != nil {
				return nil, err
			}
			if err := os.MkdirAll(secrets, 0o700); err != nil {
				return nil, err
			}
			if err := os.WriteFile(filepath.Join(secrets, secretFile(entry)), b, 0o600); err != nil {
				return nil, err
			}
			s.Secrets = append(s.Secrets, entry)
		default:
			return nil, &StreamError{Member: name, Reason: "is not a member of the send stream (handover.md, env.json, offload.bundle, HEAD, index, secrets/<entry>)"}
		}
	}
	return s, nil
}

func readLimited(r io.Reader, name string, size, limit int64) ([]byte, error) {
	if size > limit {
		return nil, &StreamError{Member: name, Reason: fmt.Sprintf("is %d bytes, over its limit of %d", size, limit)}
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("send stream: %s: %w", name, err)
	}
	return b, nil
}

func copyFile(p string, r io.Reader, mode os.FileMode) error {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return fmt.Errorf("send stream: %s: %w", filepath.Base(p), err)
	}
	return f.Close()
}
