package proc

import "os"

// Pollable returns f and a func that does nothing: Windows has no
// non-blocking mode to set on a process's standard handles.
func Pollable(f *os.File) (*os.File, func()) { return f, func() {} }
