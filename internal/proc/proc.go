// Package proc holds what the product asks of the OS about processes and
// signals, one small file per platform: detaching a child into a session
// or process group of its own, signalling a whole group, naming signals,
// and hearing terminal resizes. On Windows, which has neither sessions nor
// POSIX signals, each does the nearest thing or says it cannot.
package proc
