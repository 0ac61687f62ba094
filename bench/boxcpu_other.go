//go:build !linux

package main

import "time"

// boxCPU is 0 where /proc/PID/stat is not there to read.
func (e *env) boxCPU() time.Duration { return 0 }

// sshdCPU is 0 where /proc/PID/stat is not there to read.
func (e *env) sshdCPU() time.Duration { return 0 }

// boxPid is "": strace, which wants it, is Linux's.
func (e *env) boxPid() string { return "" }
