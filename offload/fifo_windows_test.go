package offload

import "errors"

// mkfifo fails: Windows has no named pipes in the file system, and
// offload does not run there.
func mkfifo(string) error { return errors.New("windows has no FIFOs") }
