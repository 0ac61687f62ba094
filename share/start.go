package share

import (
	"os"
	"os/exec"

	"github.com/cocoonbox/cocoonbox/internal/proc"
)

// Start starts the program exe with argv (argv[0] first) and env as a
// control master in the background: in a session of its own, its stdio
// /dev/null, its working directory /, and lock, held, as its descriptor 3
// (LockFD). It does not
// wait for the master, which outlives its caller.
func Start(exe string, argv, env []string, lock *os.File) error {
	// In /, as a daemon: the caller's directory may be removed, or be a
	// mount the master would hold busy.
	cmd := &exec.Cmd{Path: exe, Args: argv, Env: env, Dir: "/", ExtraFiles: []*os.File{lock}}
	proc.NewSession(cmd)
	if err := cmd.Start(); err != nil {
		return err
	}
	// Reaped if it ends first; our exit does not wait for it.
	go cmd.Wait()
	return nil
}

// LockFD is the descriptor under which a master started by Start finds
// its lock.
const LockFD = 3
