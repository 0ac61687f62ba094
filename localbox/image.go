package localbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/moby/moby/client"
)

// ImageRepo is the repository of the box images `localbox image build`
// makes; each build is tagged with its time (ImageRepo:YYYYMMDD-HHMMSS)
// and as ImageRepo:latest.
const ImageRepo = "cocoonbox-box"

// imagePackages are the Debian packages a box image holds beyond
// debootstrap's minbase: the contract's guest tools (seeds/001).
var imagePackages = []string{"git", "rsync", "tmux", "openssh-sftp-server", "python3", "bash", "sudo", "ca-certificates", "procps", "less", "ncurses-base"}

// imageSetup runs in the new root (chroot) as root: the box user `user`
// uid 1000 with /home/user, /workspace, passwordless sudo as the
// contract's guest has it, and no apt lists left behind.
const imageSetup = `set -e
useradd -m -u 1000 -U -s /bin/bash user
mkdir -p /workspace
chown 1000:1000 /workspace
printf 'user ALL=(ALL) NOPASSWD:ALL\nDefaults env_keep += "http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY"\n' >/etc/sudoers.d/90-cocoonbox-user
chmod 0440 /etc/sudoers.d/90-cocoonbox-user
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
`

// ImageOptions are the settings of BuildImage.
type ImageOptions struct {
	// Engine is "docker" or "podman": where the image is imported.
	Engine string
	// Suite is the Debian release; "" is bookworm.
	Suite string
	// Mirror is the Debian archive to build from; "" is debootstrap's
	// default.
	Mirror string
	// CacheDir keeps the root file system's tarball between builds; a
	// build finds it there and only imports it. "" keeps nothing.
	CacheDir string
	// Fresh builds the root file system again even when CacheDir has it.
	Fresh bool
	// Log receives debootstrap's output and one line per step.
	Log io.Writer
}

// recipe names what the root file system is made of: a change of the
// suite, the packages or the setup is a new cache entry.
func (o ImageOptions) recipe() string {
	h := sha256.Sum256([]byte(o.Suite + "\n" + o.Mirror + "\n" + strings.Join(imagePackages, ",") + "\n" + imageSetup))
	return "box-rootfs-" + o.Suite + "-" + hex.EncodeToString(h[:6]) + ".tar"
}

// BuildImage makes the box image from Debian's packages, with no image
// registry: debootstrap --variant=minbase into a directory, the setup of
// imageSetup, the directory as a tarball imported into the engine and
// tagged ImageRepo:<time> and ImageRepo:latest. It returns the time tag.
// It needs root (debootstrap, chroot) and debootstrap on the PATH.
func BuildImage(ctx context.Context, o ImageOptions) (string, error) {
	if o.Suite == "" {
		o.Suite = "bookworm"
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	cli, err := dialEngine(ctx, o.Engine)
	if err != nil {
		return "", err
	}
	defer cli.Close()
	tarball := ""
	if o.CacheDir != "" {
		if err := os.MkdirAll(o.CacheDir, 0o700); err != nil {
			return "", err
		}
		tarball = filepath.Join(o.CacheDir, o.recipe())
	}
	if _, err := os.Stat(tarball); tarball == "" || o.Fresh || errors.Is(err, fs.ErrNotExist) {
		if tarball, err = buildRootfs(ctx, o, tarball); err != nil {
			return "", err
		}
		if o.CacheDir == "" {
			defer os.Remove(tarball)
		}
	} else {
		fmt.Fprintf(o.Log, "root file system from the cache: %s\n", tarball)
	}
	f, err := os.Open(tarball)
	if err != nil {
		return "", err
	}
	defer f.Close()
	tag := ImageRepo + ":" + time.Now().UTC().Format("20060102-150405")
	res, err := cli.ImageImport(ctx, client.ImageImportSource{Source: f, SourceName: "-"}, tag, client.ImageImportOptions{
		Message: "cocoonbox box image, " + o.Suite,
		Changes: []string{
			`ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`,
			`ENV LANG=C.UTF-8`,
			`LABEL org.cocoonbox.box-image=` + o.Suite,
			`CMD ["/bin/sleep", "infinity"]`,
		},
	})
	if err != nil {
		return "", fmt.Errorf("import the image into %s: %w", o.Engine, err)
	}
	io.Copy(io.Discard, res)
	res.Close()
	if _, err := cli.ImageTag(ctx, client.ImageTagOptions{Source: tag, Target: ImageRepo + ":latest"}); err != nil {
		return "", fmt.Errorf("tag %s as latest: %w", tag, err)
	}
	fmt.Fprintf(o.Log, "image %s (and %s:latest)\n", tag, ImageRepo)
	return tag, nil
}

// buildRootfs runs debootstrap and the setup, and writes the tarball to
// dest (a temporary file when dest is ""); it returns the tarball's path.
func buildRootfs(ctx context.Context, o ImageOptions, dest string) (string, error) {
	if _, err := exec.LookPath("debootstrap"); err != nil {
		return "", errors.New("debootstrap is not installed: apt-get install debootstrap")
	}
	root, err := os.MkdirTemp("", "cocoonbox-rootfs-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(root)
	args := []string{"--variant=minbase", "--include=" + strings.Join(imagePackages, ","), o.Suite, root}
	if o.Mirror != "" {
		args = append(args, o.Mirror)
	}
	fmt.Fprintf(o.Log, "debootstrap %s\n", strings.Join(args, " "))
	run := func(name string, args ...string) error {
		c := exec.CommandContext(ctx, name, args...)
		c.Stdout, c.Stderr = o.Log, o.Log
		if err := c.Run(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
	if err := run("debootstrap", args...); err != nil {
		return "", err
	}
	if err := run("chroot", root, "/bin/sh", "-c", imageSetup); err != nil {
		return "", err
	}
	if dest == "" {
		f, err := os.CreateTemp("", "cocoonbox-rootfs-*.tar")
		if err != nil {
			return "", err
		}
		f.Close()
		dest = f.Name()
	}
	tmp := dest + ".part"
	if err := run("tar", "--numeric-owner", "--xattrs", "-C", root, "-cf", tmp, "."); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return dest, os.Rename(tmp, dest)
}
