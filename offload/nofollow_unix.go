//go:build unix

package offload

import "syscall"

// oNoFollow makes an open fail with ELOOP on a final symlink.
const oNoFollow = syscall.O_NOFOLLOW
