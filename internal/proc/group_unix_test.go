//go:build unix

package proc

import (
	"fmt"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// startedIn starts a sleep that joins g, reaped in the background; gone
// is closed once it has exited.
func startedIn(t *testing.T, g *Group) (pid int, gone chan struct{}) {
	t.Helper()
	c := exec.Command("sleep", "60")
	g.Join(c)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	gone = make(chan struct{})
	go func() { c.Wait(); close(gone) }()
	t.Cleanup(func() { c.Process.Kill() })
	return c.Process.Pid, gone
}

// TestEndGroup: a recorded group whose anchor is the recorded one is
// ended with its children; a record whose start token is not the live
// leader's (a pid reused), one naming this process's own group, and one
// naming a group that is gone end nothing; a bad record is an error.
func TestEndGroup(t *testing.T) {
	g, err := StartGroup()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	pid, gone := startedIn(t, g)
	if pg, _ := syscall.Getpgid(pid); pg != g.Pgid {
		t.Fatalf("the child is in group %d, want the anchor's %d", pg, g.Pgid)
	}

	recs := []string{fmt.Sprintf("%d %s", syscall.Getpgrp(), StartToken(syscall.Getpgrp()))}
	if StartToken(g.Pgid) != "" {
		// Without start tokens a live leader is taken for the recorded one.
		recs = append(recs, strconv.Itoa(g.Pgid)+" not-its-start")
	}
	for _, rec := range recs {
		if ended, err := EndGroup(rec, time.Second, time.Second); ended || err != nil {
			t.Errorf("EndGroup(%q) = %v, %v; want nothing ended", rec, ended, err)
		}
	}
	select {
	case <-gone:
		t.Fatal("the child ended for a record that is not its group's")
	default:
	}

	ended, err := EndGroup(g.String(), 5*time.Second, 10*time.Second)
	if !ended || err != nil {
		t.Fatalf("EndGroup(%q) = %v, %v; want ended", g.String(), ended, err)
	}
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the child still runs after EndGroup")
	}
	if ended, err := EndGroup(g.String(), time.Second, time.Second); ended || err != nil {
		t.Errorf("EndGroup of a group that is gone = %v, %v", ended, err)
	}
	for _, rec := range []string{"", "x y", "1 2", "12 a b"} {
		if _, err := EndGroup(rec, time.Second, time.Second); err == nil {
			t.Errorf("EndGroup(%q) took a bad record", rec)
		}
	}
}

// TestEndGroupKillsWhatIgnoresTerm: a child that ignores SIGTERM gets
// SIGKILL after the grace.
func TestEndGroupKillsWhatIgnoresTerm(t *testing.T) {
	g, err := StartGroup()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	c := exec.Command("sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done")
	g.Join(c)
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Process.Kill()
	if _, err := out.Read(make([]byte, 6)); err != nil {
		t.Fatalf("the child's trap: %v", err)
	}
	gone := make(chan struct{})
	go func() { c.Wait(); close(gone) }()
	if ended, err := EndGroup(g.String(), 200*time.Millisecond, 10*time.Second); !ended || err != nil {
		t.Fatalf("EndGroup = %v, %v; want ended", ended, err)
	}
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the child that ignores SIGTERM still runs")
	}
}
