//go:build unix

package cli_test

import (
	"os/exec"
	"strings"
	"testing"
)

// paramikoConfigScript connects as Fabric does from an ssh_config:
// Paramiko's SSHConfig lookup of main.cocoonbox, its ProxyCommand (with the
// tokens Paramiko expands), the host key checked under the block's
// HostKeyAlias, and one command.
const paramikoConfigScript = `
import os, sys, paramiko
o = paramiko.SSHConfig.from_path(sys.argv[1]).lookup("main.cocoonbox")
print(o["proxycommand"].split()[-1])
t = paramiko.Transport(paramiko.ProxyCommand(o["proxycommand"]))
t.start_client()
known = paramiko.HostKeys(os.path.expanduser(o["userknownhostsfile"].strip('"')))
if not known.check(o["hostkeyalias"], t.get_remote_server_key()):
    sys.exit("host key not the pinned one")
t.auth_none(o["user"])
ch = t.open_session()
ch.exec_command("echo $COCOONBOX_BOX")
print(ch.makefile("rb").read().decode().strip(), ch.recv_exit_status())
t.close()
`

// TestSSHConfigParamiko: the block cocoonbox ssh-config writes, read by
// Paramiko (Fabric's reader of ssh_config), reaches box main: its
// ProxyCommand names the host with %h, which Paramiko expands. Before,
// it was %n, which Paramiko leaves as it is, and cocoonbox-ssh was asked
// for box "%n".
func TestSSHConfigParamiko(t *testing.T) {
	t.Parallel()
	python := paramikoPython(t)
	b := startBox(t)
	cfg := writeSSHConfig(t, b)
	c := exec.Command(python, "-c", paramikoConfigScript, cfg)
	c.Env = b.Env
	out, err := c.CombinedOutput()
	if got := strings.TrimSpace(string(out)); err != nil || got != "main.cocoonbox\nmain 0" {
		t.Errorf("paramiko through the block: %v\n%s", err, out)
	}
}
