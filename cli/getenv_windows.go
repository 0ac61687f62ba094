package cli

import "os"

// systemGetenv is the process's environment as the commands read it, with
// HOME taken from USERPROFILE when it is unset: cmd.exe and PowerShell set
// no HOME (Git for Windows does), and the configuration lives under it.
func systemGetenv(k string) string {
	v := os.Getenv(k)
	if v == "" && k == "HOME" {
		v = os.Getenv("USERPROFILE")
	}
	return v
}
