package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cocoonbox/cocoonbox/localbox"
)

// imageBuildOptions are the flags of `cocoonbox localbox image build`.
type imageBuildOptions struct {
	Engine, Suite, Mirror, Cache string
	// Fresh rebuilds debootstrap's tree; KeepOld keeps the old images
	// the build would prune.
	Fresh, KeepOld bool
}

// defaultImageCache is where the box image's root file system is kept
// between builds: /var/cache/cocoonbox for root, else the user's cache.
func defaultImageCache() string {
	if os.Geteuid() == 0 {
		return "/var/cache/cocoonbox"
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "cocoonbox")
	}
	return ""
}

func newLocalboxImage(s Streams) *cobra.Command {
	var o imageBuildOptions
	img := &cobra.Command{Use: "image", Short: "The box image of the container engines", Args: usageArgs(cobra.NoArgs)}
	build := noArgsCommand("build", "Build the box image from Debian's packages (debootstrap, no image registry) and import it into the engine",
		func() error {
			if err := localbox.CheckEngine(o.Engine); err != nil || o.Engine == localbox.EngineProcess {
				return &UsageError{fmt.Errorf("--engine %q: the image is for docker or podman", o.Engine)}
			}
			tag, err := localbox.BuildImage(context.Background(), localbox.ImageOptions{
				Engine: o.Engine, Suite: o.Suite, Mirror: o.Mirror, CacheDir: o.Cache, Fresh: o.Fresh, Log: s.Err,
			})
			if err != nil {
				return err
			}
			fmt.Fprintln(s.Out, tag)
			if o.KeepOld {
				return nil
			}
			old, err := localbox.PruneImages(context.Background(), localbox.ImagePruneOptions{Engine: o.Engine})
			if err != nil {
				fmt.Fprintf(s.Err, "cocoonbox: the old box images stay: %v; remove them later with cocoonbox localbox image prune\n", err)
				return nil
			}
			if len(old) > 0 {
				fmt.Fprintf(s.Err, "removed the old box images no container uses: %s\n", strings.Join(old, ", "))
			}
			return nil
		})
	build.Flags().StringVar(&o.Engine, "engine", localbox.EngineDocker, "docker or podman: the engine the image is imported into")
	build.Flags().StringVar(&o.Suite, "suite", "bookworm", "the Debian release")
	build.Flags().StringVar(&o.Mirror, "mirror", "", "the Debian archive to build from (default: debootstrap's)")
	build.Flags().StringVar(&o.Cache, "cache", defaultImageCache(), "keep the root file system here between builds (\"\" keeps nothing)")
	build.Flags().BoolVar(&o.Fresh, "fresh", false, "build the root file system again even when the cache has it")
	build.Flags().BoolVar(&o.KeepOld, "keep-old", false, "keep the older box images no container uses (by default the build removes them)")
	img.AddCommand(build, newImagePrune(s))
	return img
}

// newImagePrune is `cocoonbox localbox image prune`.
func newImagePrune(s Streams) *cobra.Command {
	var o localbox.ImagePruneOptions
	prune := noArgsCommand("prune", "Remove the older box images no container uses: each but the latest that no box (nor any other container) runs on",
		func() error {
			if err := localbox.CheckEngine(o.Engine); err != nil || o.Engine == localbox.EngineProcess {
				return &UsageError{fmt.Errorf("--engine %q: the images are docker's or podman's", o.Engine)}
			}
			old, err := localbox.PruneImages(context.Background(), o)
			if err != nil {
				return err
			}
			for _, t := range old {
				fmt.Fprintln(s.Out, t)
			}
			switch {
			case len(old) == 0:
				fmt.Fprintf(s.Err, "no old box image to remove: each %s image is the latest or a container's\n", localbox.ImageRepo)
			case o.DryRun:
				fmt.Fprintf(s.Err, "would remove %d old box images (above); nothing removed: run it without --dry-run\n", len(old))
			default:
				fmt.Fprintf(s.Err, "removed %d old box images (above)\n", len(old))
			}
			return nil
		})
	prune.Flags().StringVar(&o.Engine, "engine", localbox.EngineDocker, "docker or podman: the engine that holds the images")
	prune.Flags().BoolVar(&o.DryRun, "dry-run", false, "name the images it would remove, and remove none")
	return prune
}
