package localbox

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/moby/moby/api/types/mount"

	"github.com/cocoonbox/cocoonbox/internal/atomicfile"
	"github.com/cocoonbox/cocoonbox/internal/safefile"
)

// guestTrustDir is where a container box sees the machine's TLS trust
// files (trustMount), read-only.
const guestTrustDir = "/etc/cocoonbox/trust"

// maxTrustFile is the largest trust file passed on, in bytes: a CA
// bundle is under 1 MiB.
const maxTrustFile = 16 << 20

// trustFileVars are the trust settings of trustVars that name a file,
// which a container box gets as a copy (SSL_CERT_DIR names a directory
// of links into the machine's own tree, which mean nothing in the box).
var trustFileVars = []string{"SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO", "REQUESTS_CA_BUNDLE"}

// trustDir is the host directory of box b's copies of the machine's
// trust files: root's, 0755, bound read-only at guestTrustDir, so that
// the box reads them and can change or plant nothing there.
func trustDir(b *box) string { return filepath.Join(b.dir, "trust") }

// trustName is the name of variable v's copy in trustDir.
func trustName(v string) string { return strings.ToLower(v) + ".pem" }

// trustMount is the bind mount of box b's trust directory, which it
// makes, with the copies of this server's trust files.
func (e *containerEngine) trustMount(b *box) (mount.Mount, error) {
	if err := mkdirRoot(trustDir(b), 0o755); err != nil {
		return mount.Mount{}, err
	}
	e.copyTrust(b)
	return mount.Mount{Type: mount.TypeBind, Source: trustDir(b), Target: guestTrustDir, ReadOnly: true}, nil
}

// copyTrust puts in box b's trust directory a copy of each file the
// trust settings this local box was started with name (its environment,
// as for the process engine; never a client's or a box's), and removes
// the copies of settings it was not started with, so that a start of
// the box gives it the server's trust of now. A container made before
// the trust directory has none, and is left so: its commands get no
// trust settings (environ), rather than ones naming files it lacks.
func (e *containerEngine) copyTrust(b *box) {
	if fi, err := os.Lstat(trustDir(b)); err != nil || !fi.IsDir() {
		return
	}
	for _, v := range trustFileVars {
		dst := filepath.Join(trustDir(b), trustName(v))
		src := os.Getenv(v)
		if src == "" {
			if err := os.Remove(dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
				e.s.logf("box %s: %s: %v", b.Name, v, err)
			}
			continue
		}
		data, _, err := safefile.ReadRegular(src, maxTrustFile)
		if err == nil {
			err = atomicfile.WriteFile(dst, data, 0o644)
		}
		if err != nil {
			e.s.logf("box %s: the trust file of %s, not passed on: %v", b.Name, v, err)
			os.Remove(dst)
		}
	}
}

// trustEnv adds to env, for each trust file box b has a copy of, its
// variable naming the copy as the box sees it.
func trustEnv(b *box, env map[string]string) {
	for _, v := range trustFileVars {
		if fi, err := os.Lstat(filepath.Join(trustDir(b), trustName(v))); err == nil && fi.Mode().IsRegular() {
			env[v] = path.Join(guestTrustDir, trustName(v))
		}
	}
}
