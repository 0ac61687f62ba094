//go:build !unix

package cores

import "time"

const cpuTimeKnown = false

func cpuTime() time.Duration { return 0 }
