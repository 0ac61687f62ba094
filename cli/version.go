package cli

import (
	"fmt"
	"io"

	"github.com/cocoonbox/cocoonbox/internal/version"
)

// versionTemplate is cobra's --version line, which the two binaries
// without cobra (cocoonbox-ssh, git-remote-cocoonbox) print alike.
const versionTemplate = "{{.Name}} version {{.Version}}\n"

// printVersion answers `PROG --version`: the line on stdout, exit 0.
func printVersion(w io.Writer, prog string) int {
	fmt.Fprintf(w, "%s version %s\n", prog, version.String())
	return ExitOK
}

// isVersion is whether args ask only for the version.
func isVersion(args []string) bool { return len(args) == 1 && args[0] == "--version" }
