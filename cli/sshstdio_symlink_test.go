//go:build unix

package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// symlinkScript makes one SFTP symlink with asyncssh or Paramiko:
// argv is client, then host, port, user, key file (empty: none) and proxy
// command (empty: connect to the port), then the link's target and path.
// Host keys are not checked: the direction of the link is the subject.
const symlinkScript = `
import asyncio, shlex, sys
client, host, port, user, key, proxy, target, link = sys.argv[1:]
if client == "asyncssh":
    import asyncssh
    async def main():
        opts = dict(username=user, known_hosts=None, client_keys=[key] if key else None, agent_path=None)
        if proxy:
            opts["proxy_command"] = proxy
        async with asyncssh.connect(host, int(port), **opts) as conn:
            async with conn.start_sftp_client() as sftp:
                await sftp.symlink(target, link)
    asyncio.run(main())
else:
    import paramiko
    if proxy:
        t = paramiko.Transport(paramiko.ProxyCommand(proxy))
    else:
        t = paramiko.Transport((host, int(port)))
    t.start_client()
    if key:
        t.auth_publickey(user, paramiko.Ed25519Key.from_private_key_file(key))
    else:
        t.auth_none(user)
    paramiko.SFTPClient.from_transport(t).symlink(target, link)
    t.close()
`

// asyncsshPython is Debian's python3 with Paramiko and asyncssh
// (scripts/deps.sh installs both); a missing one fails the test.
func asyncsshPython(t *testing.T) string {
	t.Helper()
	python := paramikoPython(t)
	if out, err := exec.Command(python, "-c", "import asyncssh").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s: install python3-asyncssh (scripts/deps.sh)", err, out)
	}
	return python
}

// TestSSHStdioSymlink: an SFTP symlink made by asyncssh (symlink(target,
// link)) or Paramiko (symlink(source, dest)) points where it does through
// sshd. The sftp-server is OpenSSH's in both, which takes SYMLINK's
// arguments in the order opposite to the draft's; asyncssh sends them in
// that order only when the server's version line names OpenSSH, so a
// line without it made the link backwards.
func TestSSHStdioSymlink(t *testing.T) {
	t.Parallel()
	python := asyncsshPython(t)
	d := startSSHD(t)
	b := startBox(t)
	via := newStdioSSH(t, b)
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(filepath.Dir(d.Config), "user")
	proxy := via.Shim + " --stdio main.cocoonbox"
	for _, client := range []string{"asyncssh", "paramiko"} {
		for _, srv := range []struct{ name, host, port, user, key, proxy string }{
			{"sshd", "127.0.0.1", d.Port, d.User, key, ""},
			{"cocoonbox-ssh --stdio", "main.cocoonbox", "22", "user", "", proxy},
		} {
			link := filepath.Join(dir, client+"-"+strings.Fields(srv.name)[0])
			target := "target-of-" + filepath.Base(link)
			c := exec.Command(python, "-c", symlinkScript, client, srv.host, srv.port, srv.user, srv.key, srv.proxy, target, link)
			c.Env = append(append(cleanEnv(t), b.Env...), "PYTHONWARNINGS=ignore")
			if out, err := c.CombinedOutput(); err != nil {
				t.Errorf("%s through %s: %v\n%s", client, srv.name, err, out)
				continue
			}
			if got, err := os.Readlink(link); err != nil || got != target {
				t.Errorf("%s through %s: symlink(%q, %q) made %q -> %q (%v); want %[4]q -> %[3]q", client, srv.name, target, link, link, got, err)
			}
		}
	}
}

// asyncsshRunScript runs one command with asyncssh through a proxy
// command (argv: proxy, command) and prints its output, or fails within
// a minute.
const asyncsshRunScript = `
import asyncio, sys
import asyncssh
proxy, command = sys.argv[1:]
async def main():
    async with asyncssh.connect("main", username="user", known_hosts=None, client_keys=None, agent_path=None, password="", proxy_command=proxy) as conn:
        r = await conn.run(command)
        sys.stdout.write(r.stdout)
asyncio.run(asyncio.wait_for(main(), 60))
`

// TestSSHStdioAsyncsshQuiet: asyncssh (Debian 12's 2.10) reads a proxy
// command's stderr as part of the SSH stream, so any line of ours there
// (the box waking, a warning) breaks its connection; --stdio -q writes
// none, and asyncssh reaches a hibernated box.
func TestSSHStdioAsyncsshQuiet(t *testing.T) {
	t.Parallel()
	python := asyncsshPython(t)
	b := startBox(t)
	via := newStdioSSH(t, b)
	runOK(t, inEnv(exec.Command("cocoonbox", "boxes", "sleep", "main"), b.Env))
	c := exec.Command(python, "-c", asyncsshRunScript, via.Shim+" --stdio -q main", "echo awake")
	c.Env = append(append(cleanEnv(t), b.Env...), "PYTHONWARNINGS=ignore")
	if out, err := c.CombinedOutput(); err != nil || string(out) != "awake\n" {
		t.Errorf("asyncssh through --stdio -q to a hibernated box: %v\n%s", err, out)
	}
}
