package shim

// The pieces of the shim's semantics that the protocol mode (package
// sshserve) shares, so that `ssh` through cocoonbox-ssh --stdio and
// cocoonbox-ssh itself run the same command in the box.

// SubsystemLine is the box command line that starts subsystem name, as -s
// runs it: only "sftp" exists, the box's sftp-server; prog names us in the
// line the box prints when it has none. Any other name is an error.
func SubsystemLine(name, prog string) (string, error) {
	return subsystemLine(name, prog, sftpServers)
}

// Terminfo is the local compiled terminfo entry for terminal name, looked
// up as ncurses does with getenv's TERMINFO, HOME and TERMINFO_DIRS, as
// the shim sends it with a terminal; nil when there is none.
func Terminfo(name string, getenv func(string) string) []byte {
	return terminfo(name, getenv)
}
