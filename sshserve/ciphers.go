package sshserve

import (
	"runtime"

	"golang.org/x/sys/cpu"
)

// gcmCiphers are AES-GCM's names in SSH, the fastest ciphers of
// x/crypto/ssh on a CPU with AES instructions.
var gcmCiphers = []string{"aes128-gcm@openssh.com", "aes256-gcm@openssh.com"}

// hasAESGCM reports whether the CPU has the instructions that make Go's
// AES-GCM fast (AES and carry-less multiplication).
func hasAESGCM() bool {
	switch runtime.GOARCH {
	case "amd64":
		return cpu.X86.HasAES && cpu.X86.HasPCLMULQDQ
	case "arm64":
		return cpu.ARM64.HasAES && cpu.ARM64.HasPMULL
	}
	return false
}

// ciphers is the server's cipher list; nil is x/crypto/ssh's default.
// OpenSSH's client takes the first of its own list the server has, and it
// lists chacha20-poly1305 first, which x/crypto/ssh runs in plain Go at a
// third of AES-GCM's speed (docs/benchmarks.md). It is offered all the
// same, after AES-GCM, so that a client that speaks nothing else, or is
// told to use it, gets it; the Host block of `cocoonbox ssh-config` puts
// AES-GCM first in the client's own list (ClientCiphers). The CTR
// ciphers stay for clients without GCM, such as Paramiko.
func ciphers() []string {
	if !hasAESGCM() {
		return nil
	}
	return append(append([]string{}, gcmCiphers...), "chacha20-poly1305@openssh.com", "aes128-ctr", "aes192-ctr", "aes256-ctr")
}

// ClientCiphers is the value for ssh_config's Ciphers in a Host block
// whose ProxyCommand runs this server: AES-GCM first, so OpenSSH does not
// settle on aes128-ctr (2-3 times the shim's time on a download,
// docs/benchmarks.md), then OpenSSH's other defaults. The list is explicit,
// not "^…", which OpenSSH before 8.7 (Windows 10's 8.1) refuses. On a CPU
// without AES instructions this costs some speed against chacha20-poly1305;
// every laptop CPU of our platforms has them.
const ClientCiphers = "aes128-gcm@openssh.com,aes256-gcm@openssh.com,chacha20-poly1305@openssh.com,aes128-ctr,aes192-ctr,aes256-ctr"

// ClientKexAlgorithms is the value for ssh_config's KexAlgorithms in such
// a Host block: key exchanges x/crypto/ssh's server speaks, spelled out,
// so that a user's own `Host *` KexAlgorithms (one the server lacks, such
// as sntrup761x25519-sha512@openssh.com) does not apply to our hosts.
// Every name is known to OpenSSH 7.4 and later (curve25519-sha256 came in
// 7.4; an unknown name makes ssh refuse the whole file), so the
// post-quantum mlkem768x25519-sha256 (OpenSSH 9.9) is not here:
// KexPQ is put first for an ssh that knows it.
const ClientKexAlgorithms = "curve25519-sha256,curve25519-sha256@libssh.org,ecdh-sha2-nistp256,ecdh-sha2-nistp384,ecdh-sha2-nistp521,diffie-hellman-group14-sha256"

// KexPQ is the post-quantum key exchange the server speaks, first in the
// block's KexAlgorithms when the user's ssh knows it (ssh -Q kex), so
// OpenSSH 10.1 and later print no warning about a key exchange without it.
const KexPQ = "mlkem768x25519-sha256"
