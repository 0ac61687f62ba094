package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/cocoonbox/cocoonbox/internal/version"
)

// versionTemplate is cobra's --version line, which the two binaries
// without cobra (cocoonbox-ssh, git-remote-cocoonbox) print alike. All
// four take --version, and all but cocoonbox-ssh -V: cobra's default -v
// would differ from the others and, on cocoonbox, from ssh's verbose -v.
const versionTemplate = "{{.Name}} version {{.Version}}\n"

// printVersion answers `PROG --version`: the line on stdout, exit 0.
func printVersion(w io.Writer, prog string) int {
	fmt.Fprintf(w, "%s version %s\n", prog, version.String())
	return ExitOK
}

// isVersion is whether args ask only for the version: --version, or -V
// when short (cocoonbox-ssh's -V is ssh's, answered by the shim).
func isVersion(args []string, short bool) bool {
	return len(args) == 1 && (args[0] == "--version" || short && args[0] == "-V")
}

// newVersion is `cocoonbox version`, which people type for --version
// (gh, kubectl, docker have it): the same line.
func newVersion(s Streams) *cobra.Command {
	return noArgsCommand("version", versionUsage, func() error {
		printVersion(s.Out, "cocoonbox")
		return nil
	})
}

// versionUsage is the help line of the --version/-V flag of the cobra
// binaries.
const versionUsage = "print the version and exit"
