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
	"regexp"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/cocoonbox/cocoonbox/internal/flock"
)

// ImageRepo is the repository of the box images `localbox image build`
// makes; each build is tagged with its time (ImageRepo:YYYYMMDD-HHMMSS)
// and as ImageRepo:latest.
const ImageRepo = "cocoonbox-box"

// imagePackages are the Debian packages a box image holds beyond
// debootstrap's minbase: the contract's guest tools (seeds/001), and curl
// for the vendors' CLI installers (offload install-cli; 2 packages,
// 1.4 MB). Not Node.js and npm: about 360 packages and 200 MB.
var imagePackages = []string{"git", "rsync", "tmux", "openssh-sftp-server", "python3", "bash", "sudo", "ca-certificates", "procps", "less", "ncurses-base", "curl"}

// imageSetup runs in the new root (chroot) as root: the box user `user`
// uid 1000 with /home/user, /workspace, passwordless sudo as the
// contract's guest has it, and no apt lists left behind.
const imageSetup = `set -e
id user >/dev/null 2>&1 || useradd -m -u 1000 -U -s /bin/bash user
# Not .bash_logout: Debian's clears the screen when a login shell ends,
# which an ssh-shaped -T login prints as stray bytes.
rm -f /home/user/.bash_logout /etc/skel/.bash_logout
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
	// CacheDir keeps debootstrap's root file system between builds; a
	// build finds it there and only sets it up and imports it. "" keeps
	// nothing.
	CacheDir string
	// Fresh builds the root file system again even when CacheDir has it.
	Fresh bool
	// Log receives debootstrap's output and one line per step.
	Log io.Writer
}

// recipe names what debootstrap's root file system is made of: a change
// of the suite, the mirror or the packages is a new cache entry.
func (o ImageOptions) recipe() string {
	h := sha256.Sum256([]byte(o.Suite + "\n" + o.Mirror + "\n" + strings.Join(imagePackages, ",")))
	return "box-rootfs-" + o.Suite + "-" + hex.EncodeToString(h[:6])
}

// BuildImage makes the box image from Debian's packages, with no image
// registry: debootstrap --variant=minbase into a directory, the setup of
// imageSetup, the directory as a tarball imported into the engine and
// tagged ImageRepo:<time> and ImageRepo:latest. It returns the time tag.
// It needs root (debootstrap, chroot) and debootstrap on the PATH. Builds
// with one CacheDir take turns (a lock file there).
func BuildImage(ctx context.Context, o ImageOptions) (string, error) {
	release, err := lockCache(ctx, o.CacheDir)
	if err != nil {
		return "", err
	}
	defer release()
	return buildImage(ctx, o)
}

// EnsureImage returns the image ImageRepo:latest stands for, and builds
// one (BuildImage) only when the engine has none. A build with the same
// CacheDir under way is waited for, not repeated: .ci/run starts one
// beside the tests, and the container engine's tests ask for the image
// with EnsureImage.
func EnsureImage(ctx context.Context, o ImageOptions) (string, error) {
	release, err := lockCache(ctx, o.CacheDir)
	if err != nil {
		return "", err
	}
	defer release()
	cli, err := dialEngine(ctx, o.Engine)
	if err != nil {
		return "", err
	}
	tag, err := latestTag(ctx, cli)
	cli.Close()
	if !cerrdefs.IsNotFound(err) {
		return tag, err
	}
	return buildImage(ctx, o)
}

// lockCache waits for the build lock of cache dir ("": no lock).
func lockCache(ctx context.Context, dir string) (func(), error) {
	if dir == "" {
		return func() {}, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return flock.HoldContext(ctx, filepath.Join(dir, "build.lock"), flock.Exclusive)
}

func buildImage(ctx context.Context, o ImageOptions) (string, error) {
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
	tarball, err := buildRootfs(ctx, o)
	if err != nil {
		return "", err
	}
	defer os.Remove(tarball)
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

// buildRootfs makes the image's root file system as a tarball in a
// temporary file: debootstrap's (from the cache when it holds it), a
// copy of it set up by imageSetup.
func buildRootfs(ctx context.Context, o ImageOptions) (string, error) {
	run := func(name string, args ...string) error {
		c := exec.CommandContext(ctx, name, args...)
		c.Stdout, c.Stderr = o.Log, o.Log
		if err := c.Run(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
	work, err := os.MkdirTemp("", "cocoonbox-rootfs-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	base := filepath.Join(work, "base")
	if o.CacheDir != "" {
		if err := os.MkdirAll(o.CacheDir, 0o700); err != nil {
			return "", err
		}
		base = filepath.Join(o.CacheDir, o.recipe())
	}
	if _, err := os.Stat(base); o.Fresh || errors.Is(err, fs.ErrNotExist) {
		if _, err := exec.LookPath("debootstrap"); err != nil {
			return "", errors.New("debootstrap is not installed: apt-get install debootstrap")
		}
		part := base + ".part"
		os.RemoveAll(part)
		args := []string{"--variant=minbase", "--include=" + strings.Join(imagePackages, ","), o.Suite, part}
		if o.Mirror != "" {
			args = append(args, o.Mirror)
		}
		fmt.Fprintf(o.Log, "debootstrap %s\n", strings.Join(args, " "))
		if err := run("debootstrap", args...); err != nil {
			return "", err
		}
		os.RemoveAll(base)
		if err := os.Rename(part, base); err != nil {
			return "", err
		}
	} else {
		fmt.Fprintf(o.Log, "debootstrap's root file system from the cache: %s\n", base)
	}
	root := filepath.Join(work, "root")
	if err := run("cp", "-a", base, root); err != nil {
		return "", err
	}
	if err := run("chroot", root, "/bin/sh", "-c", imageSetup); err != nil {
		return "", err
	}
	addMise(ctx, o, work, root)
	f, err := os.CreateTemp("", "cocoonbox-rootfs-*.tar")
	if err != nil {
		return "", err
	}
	f.Close()
	if err := run("tar", "--numeric-owner", "--xattrs", "-C", root, "-cf", f.Name(), "."); err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// addMise puts mise, which is no Debian package, at /usr/local/bin/mise
// in root: the binary of npm's @jdxcode/mise, installed with the host's
// npm into work. Without npm, or when it fails, the image has no mise,
// and the log says so.
func addMise(ctx context.Context, o ImageOptions, work, root string) {
	npm, err := exec.LookPath("npm")
	if err != nil {
		fmt.Fprintln(o.Log, "mise left out of the image: no npm here to fetch it (apt-get install npm)")
		return
	}
	prefix := filepath.Join(work, "npm")
	c := exec.CommandContext(ctx, npm, "install", "-g", "--silent", "--no-fund", "--no-audit", "--prefix", prefix, "@jdxcode/mise")
	c.Stdout, c.Stderr = o.Log, o.Log
	bin := filepath.Join(prefix, "lib", "node_modules", "@jdxcode", "mise", "bin", "mise")
	if err := c.Run(); err != nil {
		fmt.Fprintf(o.Log, "mise left out of the image: npm install @jdxcode/mise: %v\n", err)
		return
	}
	data, err := os.ReadFile(bin)
	if err == nil {
		err = os.WriteFile(filepath.Join(root, "usr", "local", "bin", "mise"), data, 0o755)
	}
	if err != nil {
		fmt.Fprintf(o.Log, "mise left out of the image: %v\n", err)
		return
	}
	fmt.Fprintln(o.Log, "mise from npm's @jdxcode/mise at /usr/local/bin/mise")
}

// ImagePruneOptions are the settings of PruneImages.
type ImagePruneOptions struct {
	// Engine is "docker" or "podman"; Host its API address ("" for its
	// usual socket).
	Engine, Host string
	// Repo is the images' repository; "" is ImageRepo.
	Repo string
	// DryRun names what would go and removes nothing.
	DryRun bool
}

// buildTag matches the time tags BuildImage gives (YYYYMMDD-HHMMSS).
var buildTag = regexp.MustCompile(`^[0-9]{8}-[0-9]{6}$`)

// PruneImages removes the box images of the engine that are neither the
// latest (REPO:latest) nor used by any container, whatever made it: each
// time tag of the repository (REPO:YYYYMMDD-HHMMSS) whose image is
// another than the latest's and no container's. Other tags, and images
// of other repositories, stay. It returns the tags it removed (or would
// remove), oldest first. An engine with no latest image keeps all. A
// container made meanwhile on one keeps it: the engine refuses to remove
// an image a container uses, which is no error here.
func PruneImages(ctx context.Context, o ImagePruneOptions) ([]string, error) {
	repo := o.Repo
	if repo == "" {
		repo = ImageRepo
	}
	cli, err := dialEngine(ctx, o.Engine, o.Host)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	latest, err := cli.ImageInspect(ctx, repo+":latest")
	if cerrdefs.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	used := map[string]bool{latest.ID: true}
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true})
	if err != nil {
		return nil, err
	}
	for _, c := range cs.Items {
		used[c.ImageID] = true
	}
	imgs, err := cli.ImageList(ctx, client.ImageListOptions{Filters: client.Filters{}.Add("reference", repo)})
	if err != nil {
		return nil, err
	}
	var old []string
	for _, im := range imgs.Items {
		if used[im.ID] {
			continue
		}
		for _, t := range im.RepoTags {
			if r, tag, ok := strings.Cut(t, ":"); ok && r == repo && buildTag.MatchString(tag) {
				old = append(old, t)
			}
		}
	}
	slices.Sort(old)
	if o.DryRun {
		return old, nil
	}
	var removed []string
	for _, t := range old {
		_, err := cli.ImageRemove(ctx, t, client.ImageRemoveOptions{PruneChildren: true})
		switch {
		case err == nil:
			removed = append(removed, t)
		case cerrdefs.IsNotFound(err) || cerrdefs.IsConflict(err):
		default:
			return removed, fmt.Errorf("remove image %s from %s: %w", t, o.Engine, err)
		}
	}
	return removed, nil
}
