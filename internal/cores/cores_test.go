package cores

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

func TestPolicy(t *testing.T) {
	p := &policy{max: 4, procs: 1}
	step := func(use, wait float64, want int, wantTick time.Duration) {
		t.Helper()
		got, next := p.step(use, wait)
		if got != want || next != wantTick {
			t.Fatalf("step(%v, %v) = %d, %v; want %d, %v", use, wait, got, next, want, wantTick)
		}
	}
	// Requests handed on one at a time: busy, but nothing waits for the P.
	step(0.9, 0.02, 1, tick)
	// Idle: sampled once a second.
	step(0, 0, 1, idleTick)
	// Goroutines queue for the one P: every core.
	step(1, 0.5, 4, tick)
	// Busy on several cores: stays wide, however long.
	for range 3 * narrowTicks {
		step(1.5, 0, 4, tick)
	}
	// Light for fewer than narrowTicks ticks in a row: stays wide.
	for range narrowTicks - 1 {
		step(0.1, 0, 4, tick)
	}
	step(0.8, 0, 4, tick)
	for range narrowTicks - 1 {
		step(0.1, 0, 4, tick)
	}
	// The narrowTicks-th light tick in a row: one P again.
	step(0.1, 0, 1, tick)
	step(0, 0, 1, idleTick)
}

func TestFollow(t *testing.T) {
	t.Setenv("GOMAXPROCS", "")
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	stop := Follow()
	procs := func(want int, why string) {
		t.Helper()
		// A bound on a wait, not a measure: the policy reacts in a
		// second at most, however loaded the machine.
		for end := time.Now().Add(time.Minute); runtime.GOMAXPROCS(0) != want; {
			if time.Now().After(end) {
				t.Fatalf("GOMAXPROCS is %d, not %d, a minute on (%s)", runtime.GOMAXPROCS(0), want, why)
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Logf("GOMAXPROCS %d: %s", want, why)
	}
	procs(1, "idle")
	if again := Follow(); again == nil {
		t.Fatal("a second Follow returned nil")
	} else {
		again() // a no-op: the first still runs
	}
	// Two goroutines that never wait queue for the one P.
	var quit atomic.Bool
	for range 2 {
		go func() {
			for !quit.Load() {
			}
		}()
	}
	procs(4, "two busy goroutines")
	quit.Store(true)
	procs(1, "idle again")
	stop()
	if got := runtime.GOMAXPROCS(0); got != 4 {
		t.Fatalf("after stop GOMAXPROCS = %d, want 4 as before", got)
	}
	stop()
}

func TestFollowLeavesSetting(t *testing.T) {
	t.Setenv("GOMAXPROCS", "3")
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	stop := Follow()
	defer stop()
	time.Sleep(3 * tick)
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Fatalf("with GOMAXPROCS set in the environment, Follow changed it to %d", got)
	}
}
