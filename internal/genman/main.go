// Command genman writes the man pages of the four binaries into the
// directory it is given (make man: man/man1).
package main

import (
	"fmt"
	"os"

	"github.com/cocoonbox/cocoonbox/cli"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: genman DIR")
		os.Exit(2)
	}
	if err := cli.ManPages(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "genman:", err)
		os.Exit(1)
	}
}
