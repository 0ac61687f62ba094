package main

import (
	"fmt"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
)

// What a run starts outside its own process group, the local box with its
// boxes' tmux servers, would outlive a bench killed by Ctrl-C: every such
// thing registers its undoing here. run's defers undo each in turn; on
// SIGINT or SIGTERM the handler undoes all that are left, last first, and
// exits 128+N.

var undos struct {
	mu sync.Mutex
	l  []*sync.Once
	fs []func()
	// signaled: the handler has the signal and will exit.
	signaled bool
}

// stopping reports whether a signal is being handled: then main leaves
// the exit to the handler, whose undoing is what failed the run.
func stopping() bool {
	undos.mu.Lock()
	defer undos.mu.Unlock()
	return undos.signaled
}

// atExit registers f and returns the func that runs it: once, whether
// called by the caller's defer or by the signal handler first.
func atExit(f func()) func() {
	once := &sync.Once{}
	undos.mu.Lock()
	undos.l, undos.fs = append(undos.l, once), append(undos.fs, f)
	undos.mu.Unlock()
	return func() { once.Do(f) }
}

// undoOnSignal starts the handler: on SIGINT or SIGTERM it runs every
// registered undo not run yet (waiting for one under way), last first,
// and exits 128+N; a second signal meanwhile kills the bench.
func undoOnSignal() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-ch
		// A second one ends the bench at once, as without the handler.
		signal.Reset(syscall.SIGINT, syscall.SIGTERM)
		fmt.Fprintf(os.Stderr, "bench: %v: stopping what the run started (again to quit at once)\n", s)
		undos.mu.Lock()
		undos.signaled = true
		l, fs := slices.Clone(undos.l), slices.Clone(undos.fs)
		undos.mu.Unlock()
		for i := len(l) - 1; i >= 0; i-- {
			l[i].Do(fs[i])
		}
		os.Exit(128 + int(s.(syscall.Signal)))
	}()
}
