// Package cores sets how many threads run Go code at once (GOMAXPROCS)
// from what the process is doing: one while its goroutines hand work to
// each other one at a time, as a relay of small requests does, and every
// core the runtime found while they queue for one.
//
// A relay in Go wakes a goroutine at each hop (x/crypto/ssh's reader, its
// channel, gRPC's reader and writer). With a P idle, each wake also wakes
// an idle thread to run it, on another CPU, and that thread parks again a
// few microseconds later: on the sftp requests row (docs/benchmarks.md)
// it was about a third of the context switches of cocoonbox-ssh --stdio
// and of the local box. With one P the woken goroutine runs on the thread
// that woke it, once that one waits. A transfer that keeps goroutines
// busy on both ends shows as goroutines waiting for the P, and then gets
// every core back.
package cores

import (
	"os"
	"runtime"
	"runtime/metrics"
	"sync"
	"time"
)

const (
	// tick is how often Follow samples while the process works.
	tick = 50 * time.Millisecond
	// idleTick is how often it samples while the process is idle, so that
	// a process kept for days (a ProxyCommand under ssh's ControlMaster)
	// wakes once a second, not twenty times.
	idleTick = time.Second
	// idleUse is the CPU use (cores) below which a tick counts as idle.
	idleUse = 0.01
	// widenWait is the time goroutines spent runnable, waiting for the one
	// P, as a share of a tick, above which every core is given back:
	// goroutines that hand work on one at a time wait microseconds; a
	// second busy goroutine waits up to the scheduler's 10 ms slice.
	widenWait = 0.2
	// narrowUse is the CPU use (cores) below which, for narrowTicks ticks
	// in a row, the process goes back to one P.
	narrowUse   = 0.5
	narrowTicks = 20
)

// policy decides GOMAXPROCS from one tick's sample at a time.
type policy struct {
	max   int // the widest: GOMAXPROCS as the process started
	procs int // the current setting
	low   int // ticks in a row below narrowUse
}

// step returns the setting for the next tick, and how long to wait for
// it, given the last tick's CPU use (cores: CPU time over wall time) and
// the share of it goroutines spent runnable but not running.
func (p *policy) step(use, wait float64) (int, time.Duration) {
	switch {
	case p.procs < p.max && wait >= widenWait:
		p.procs, p.low = p.max, 0
	case p.procs > 1 && use < narrowUse:
		if p.low++; p.low >= narrowTicks {
			p.procs, p.low = 1, 0
		}
	default:
		p.low = 0
	}
	if p.procs == 1 && use < idleUse {
		return p.procs, idleTick
	}
	return p.procs, tick
}

var (
	mu      sync.Mutex
	running bool
)

// Follow starts setting GOMAXPROCS as the package comment says, in a
// goroutine of its own, and returns the func that stops it and puts
// back the setting it found. It does nothing when GOMAXPROCS is set in
// the environment (the user's choice), when the runtime found one CPU,
// where the process's CPU time cannot be read (Windows), or when a
// Follow is already running.
func Follow() (stop func()) {
	orig := runtime.GOMAXPROCS(0)
	mu.Lock()
	defer mu.Unlock()
	if running || orig < 2 || os.Getenv("GOMAXPROCS") != "" || !cpuTimeKnown {
		return func() {}
	}
	running = true
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		follow(orig, done)
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			<-ended
			runtime.GOMAXPROCS(orig)
			mu.Lock()
			running = false
			mu.Unlock()
		})
	}
}

// follow samples and applies the policy until done is closed.
func follow(orig int, done <-chan struct{}) {
	p := &policy{max: orig, procs: 1}
	runtime.GOMAXPROCS(1)
	s := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	metrics.Read(s)
	waited := waitTime(s[0].Value)
	cpu, wall := cpuTime(), time.Now()
	t := time.NewTimer(tick)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		metrics.Read(s)
		w := waitTime(s[0].Value)
		c, now := cpuTime(), time.Now()
		d := now.Sub(wall).Seconds()
		if d <= 0 {
			d = tick.Seconds()
		}
		procs, next := p.step((c-cpu).Seconds()/d, (w-waited)/d)
		if procs != runtime.GOMAXPROCS(0) {
			runtime.GOMAXPROCS(procs)
		}
		waited, cpu, wall = w, c, now
		t.Reset(next)
	}
}

// waitTime is the total of a /sched/latencies histogram in seconds, each
// sample counted at its bucket's lower bound (an underestimate, never
// more than the time goroutines waited).
func waitTime(v metrics.Value) float64 {
	if v.Kind() != metrics.KindFloat64Histogram {
		return 0
	}
	h := v.Float64Histogram()
	var sum float64
	for i, n := range h.Counts {
		if lo := h.Buckets[i]; n > 0 && lo > 0 {
			sum += float64(n) * lo
		}
	}
	return sum
}
