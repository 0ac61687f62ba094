//go:build linux

package boxagent

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// inHook finds one of our hook commands (cocoonbox-agent offload event)
// anywhere under the CLI's process, as the CLI runs it (through sh -c),
// and nothing once it has ended or under another process.
func TestInHook(t *testing.T) {
	dir := t.TempDir()
	hook := filepath.Join(dir, "cocoonbox-agent")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\nsleep 5\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cli := exec.Command("sh", "-c", "'"+hook+"' offload event --repo k --cli claude --hook Stop >/dev/null; sleep 30")
	other := exec.Command("sh", "-c", "sleep 30; true")
	for _, c := range []*exec.Cmd{cli, other} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		defer func(c *exec.Cmd) { c.Process.Kill(); c.Wait() }(c)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !inHook(cli.Process.Pid) {
		if time.Now().After(deadline) {
			t.Fatal("inHook found no hook under the CLI")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if inHook(other.Process.Pid) {
		t.Error("inHook found a hook under a process that runs none")
	}
	if inHook(0) {
		t.Error("inHook(0) is true")
	}
	// The hook ends: the CLI is out of it.
	for _, p := range children(cli.Process.Pid) {
		if st, ok := readProcStat(p); ok && st.ppid == cli.Process.Pid {
			killPid(p)
		}
	}
	for inHook(cli.Process.Pid) {
		if time.Now().After(deadline) {
			t.Fatal("inHook still finds the hook after it ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func killPid(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		p.Kill()
	}
}
