package boxsession

import (
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
)

// TerminfoVar is the variable of a terminal session's open that carries
// the client's compiled terminfo entry for its TERM, in standard base64:
// the open installs it (InstallTerminfo) and drops the variable.
const TerminfoVar = "COCOONBOX_TERMINFO"

// maxTerminfo bounds an entry InstallTerminfo writes, in bytes.
const maxTerminfo = 64 << 10

var terminfoNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.+_-]{0,63}$`) })

// InstallTerminfo puts entry (base64), the compiled terminfo entry of
// term, in home's .terminfo, where ncurses looks first, under the first
// letter of term and its hex code (ncurses' two layouts), unless one is
// there; as the local box does for a plain Exec's terminal. It runs as
// the box user, in the user's own home.
func InstallTerminfo(home, term, entry string) error {
	data, err := base64.StdEncoding.DecodeString(entry)
	if err != nil || len(data) == 0 || len(data) > maxTerminfo || !terminfoNameRE().MatchString(term) {
		return errors.New("bad terminfo entry for " + term)
	}
	for _, sub := range []string{term[:1], strconv.FormatInt(int64(term[0]), 16)} {
		dir := filepath.Join(home, ".terminfo", sub)
		f := filepath.Join(dir, term)
		if _, err := os.Lstat(f); err == nil {
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(f, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
