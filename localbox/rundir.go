package localbox

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
)

// RunDir is the run directory of the box whose directory is boxDir: the
// box's /run (COCOONBOX_RUN_DIR and TMUX_TMPDIR), which holds the offload
// inbox's socket, the secrets and tmux's socket. It lies outside the state
// directory, at a path that leaves room for every socket in it whatever
// the state directory's depth (a unix socket's address holds 107 bytes of
// path on Linux): runBase/K, K 16 hex digits of a hash of boxDir's
// absolute path. It lasts while the local box serves: made at its start,
// removed at its stop and with the box.
func RunDir(boxDir string) string {
	if abs, err := filepath.Abs(boxDir); err == nil {
		boxDir = abs
	}
	h := sha256.Sum256([]byte(boxDir))
	return filepath.Join(runBase(), hex.EncodeToString(h[:8]))
}

// runBase holds the run directories of this user's local boxes: for root
// /run/cocoonbox-localbox (/var/run where there is no /run), a tmpfs as a
// real box's /run is, in a directory only root writes; for any other user
// /tmp/cocoonbox-localbox-UID, as tmux keeps /tmp/tmux-UID.
func runBase() string {
	if os.Geteuid() == 0 {
		if fi, err := os.Stat("/run"); err == nil && fi.IsDir() {
			return "/run/cocoonbox-localbox"
		}
		return "/var/run/cocoonbox-localbox"
	}
	return "/tmp/cocoonbox-localbox-" + strconv.Itoa(os.Geteuid())
}
