//go:build !darwin

package unixsock

// Max is the longest unix socket path Linux takes (sun_path is 108
// bytes, NUL included); Windows' AF_UNIX has the same.
const Max = 107
