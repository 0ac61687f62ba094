package offload

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseSecret(t *testing.T) {
	good := []string{"aws", "kube", "gcloud", "ssh:id_ed25519", "file:.env", "file:config/master.key", "file:.env.local"}
	bad := []string{"", "aws:x", "vault", "file:", "file:../..", "file:../x", "file:/etc/passwd", "file:a/../../b",
		"file:./.env", "file:.", "file:.git/config", "file:a//b", "ssh:", "ssh:../id", "ssh:a/b", "file:a\nb"}
	for _, s := range good {
		if _, err := ParseSecret(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	for _, s := range bad {
		if _, err := ParseSecret(s); err == nil {
			t.Errorf("%q: accepted", s)
		}
	}
}

func TestSecretMembers(t *testing.T) {
	env := testEnv(t)
	r := newRepo(t, env, map[string]string{".gitignore": ".env\nkeys/\n", "tracked.key": "t"})
	home := t.TempDir()
	writeFiles(t, r.Top, map[string]string{".env": "A=1\n", "plain.key": "p", "keys/x": "k"})
	writeFiles(t, home, map[string]string{".ssh/id_ed25519": "KEY", ".aws/credentials": "AWS"})
	os.Symlink(filepath.Join(home, ".ssh"), filepath.Join(r.Top, "sshdir"))

	ms, err := secretMembers([]string{"file:.env", "ssh:id_ed25519", "aws"}, r.Top, home)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"secrets/file:.env": filepath.Join(r.Top, ".env"), "secrets/ssh:id_ed25519": filepath.Join(home, ".ssh", "id_ed25519"),
		"secrets/aws": filepath.Join(home, ".aws", "credentials")}
	for _, m := range ms {
		if want[m.Name] != m.Path || m.Data != nil {
			t.Errorf("member %+v", m)
		}
	}
	for _, e := range []string{"file:sshdir/id_ed25519", "kube", "file:missing"} {
		if _, err := secretMembers([]string{e}, r.Top, home); err == nil {
			t.Errorf("%s: accepted", e)
		}
	}
	ctx := context.Background()
	if err := r.CheckFileSecrets(ctx, []string{"file:.env", "file:keys/x", "aws"}); err != nil {
		t.Errorf("ignored files: %v", err)
	}
	if err := r.CheckFileSecrets(ctx, []string{"file:tracked.key"}); err == nil || !strings.Contains(err.Error(), "tracked") {
		t.Errorf("a tracked file: %v", err)
	}
	if err := r.CheckFileSecrets(ctx, []string{"file:plain.key"}); err == nil || !strings.Contains(err.Error(), "not git-ignored") {
		t.Errorf("an untracked file not ignored: %v", err)
	}
}
