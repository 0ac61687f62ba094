//go:build !linux

package boxsession

import (
	"os"
	"time"
)

// pending reads f into b: only Linux has tee(2), so nothing is counted.
func pending(f *os.File, b []byte) (int, int, error) {
	n, err := f.Read(b)
	return 0, n, err
}

// tee is Linux's only.
func tee(src, dst *os.File, n int) (int, error) { return 0, errNoTee }

// haveSplice says splice(2) is there: Linux's only.
const haveSplice = false

// splice is Linux's only.
func splice(src, dst *os.File, n int, wait time.Duration) (int, error) { return 0, errNoTee }
