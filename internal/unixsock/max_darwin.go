package unixsock

// Max is the longest unix socket path macOS takes (sun_path is 104 bytes,
// NUL included).
const Max = 103
