//go:build !windows

package cli

import "os"

// systemGetenv is the process's environment as the commands read it.
func systemGetenv(k string) string { return os.Getenv(k) }
