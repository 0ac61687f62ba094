package shim

import "errors"

// fork refuses -f: Windows has no session to detach a process into.
func (r *runner) fork() int {
	return r.fail(errors.New("-f (go to background) is not supported on Windows"))
}

// inBackground is never true on Windows: fork starts no child.
func (r *runner) inBackground() bool { return false }
