package localbox_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"maps"
	"os"
	"slices"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/cocoonbox/cocoonbox/localbox"
)

// PruneImages removes the old time tags of the box image repository that
// no container uses, and keeps the latest, one a stopped container was
// made on, and a tag that is no build's. The images are the test's own,
// in a repository of its own: other tests' boxes use the real one.
func TestPruneImages(t *testing.T) {
	eng := os.Getenv("COCOONBOX_TEST_ENGINE")
	if eng == "" {
		t.Skip("COCOONBOX_TEST_ENGINE is unset: set it to docker or podman (as .ci/run does) to run the container engine's tests")
	}
	ctx := context.Background()
	host := "unix:///var/run/docker.sock"
	if eng == localbox.EnginePodman {
		host = "unix:///run/podman/podman.sock"
	}
	cli, err := client.New(client.WithHost(host), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	b := make([]byte, 4)
	rand.Read(b)
	repo := "cocoonbox-prunetest-" + hex.EncodeToString(b)
	tags := map[string]string{
		"old":    repo + ":20260101-000001",
		"used":   repo + ":20260101-000002",
		"latest": repo + ":20260101-000003",
		"mine":   repo + ":mine",
	}
	t.Cleanup(func() {
		for _, tag := range append(slices.Collect(maps.Values(tags)), repo+":latest") {
			cli.ImageRemove(ctx, tag, client.ImageRemoveOptions{Force: true, PruneChildren: true})
		}
	})
	for what, tag := range tags {
		importImage(t, cli, tag, what)
	}
	if _, err := cli.ImageTag(ctx, client.ImageTagOptions{Source: tags["latest"], Target: repo + ":latest"}); err != nil {
		t.Fatal(err)
	}
	c, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{Config: &container.Config{Image: tags["used"], Cmd: []string{"/none"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true}) })

	o := localbox.ImagePruneOptions{Engine: eng, Host: host, Repo: repo, DryRun: true}
	got, err := localbox.PruneImages(ctx, o)
	if err != nil || !slices.Equal(got, []string{tags["old"]}) {
		t.Fatalf("dry run: %v %v, want [%s]", got, err, tags["old"])
	}
	if _, err := cli.ImageInspect(ctx, tags["old"]); err != nil {
		t.Fatalf("the dry run removed %s: %v", tags["old"], err)
	}
	o.DryRun = false
	got, err = localbox.PruneImages(ctx, o)
	if err != nil || !slices.Equal(got, []string{tags["old"]}) {
		t.Fatalf("prune: %v %v, want [%s]", got, err, tags["old"])
	}
	if _, err := cli.ImageInspect(ctx, tags["old"]); err == nil {
		t.Errorf("%s is still there", tags["old"])
	}
	for _, tag := range []string{tags["used"], tags["latest"], repo + ":latest", tags["mine"]} {
		if _, err := cli.ImageInspect(ctx, tag); err != nil {
			t.Errorf("%s went: %v", tag, err)
		}
	}
	if got, err = localbox.PruneImages(ctx, o); err != nil || len(got) != 0 {
		t.Errorf("a second prune: %v %v, want nothing", got, err)
	}
}

// importImage imports a one-file image tagged tag whose file holds
// content (so that each is an image of its own).
func importImage(t *testing.T, cli *client.Client, tag, content string) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "what", Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg})
	tw.Write([]byte(content))
	tw.Close()
	res, err := cli.ImageImport(context.Background(), client.ImageImportSource{Source: &buf, SourceName: "-"}, tag, client.ImageImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res)
	res.Close()
}
