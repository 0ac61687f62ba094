package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/cocoonbox/cocoonbox/sshserve"
)

// writeStdioConfig writes an ssh_config for OpenSSH's own ssh through
// cocoonbox-ssh --stdio, as a user's Host *.cocoonbox block has it: the
// ProxyCommand, the host key pinned, AES-GCM first where it is fast.
func (e *env) writeStdioConfig() error {
	home := filepath.Join(e.work, "home")
	key, err := sshserve.HostKey(filepath.Join(home, ".local", "state", "cocoonbox"))
	if err != nil {
		return err
	}
	known := filepath.Join(e.work, "stdio_known_hosts")
	if err := os.WriteFile(known, []byte(sshserve.KnownHostsLine("*.cocoonbox", key.PublicKey())+"\n"), 0o600); err != nil {
		return err
	}
	cfg := fmt.Sprintf(`Host *.cocoonbox
  ProxyCommand %q --stdio %%n
  UserKnownHostsFile %s
  StrictHostKeyChecking yes
  BatchMode yes
  LogLevel ERROR
`, filepath.Join(e.bin, "cocoonbox-ssh"), known)
	cfg += "  Ciphers " + sshserve.ClientCiphers + "\n"
	e.stdioCfg = filepath.Join(e.work, "stdio_ssh_config")
	return os.WriteFile(e.stdioCfg, []byte(cfg), 0o600)
}

// viaStdio is OpenSSH's ssh to main.cocoonbox through cocoonbox-ssh
// --stdio, in the local box's environment.
func (e *env) viaStdio(args ...string) *exec.Cmd {
	c := exec.Command("ssh", append([]string{"-F", e.stdioCfg, "main.cocoonbox"}, args...)...)
	c.Env = e.boxEnv
	return c
}
