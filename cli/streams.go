// Package cli is the process glue of the cocoonbox binaries: it reads the
// command line and environment, wires the packages below, and maps errors
// to exit codes. Nothing below it calls os.Exit.
package cli

import (
	"io"
	"os"

	"golang.org/x/term"
)

// Streams are a process's standard streams.
type Streams struct {
	In       io.Reader
	Out, Err io.Writer
}

// System returns the process's own streams.
func System() Streams { return Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr} }

// isTerminal reports whether v is a terminal.
func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
