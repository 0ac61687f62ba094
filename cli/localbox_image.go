package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/cocoonbox/cocoonbox/localbox"
)

// imageBuildOptions are the flags of `cocoonbox localbox image build`.
type imageBuildOptions struct {
	Engine, Suite, Mirror, Cache string
	Fresh                        bool
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
			return nil
		})
	build.Flags().StringVar(&o.Engine, "engine", localbox.EngineDocker, "docker or podman: the engine the image is imported into")
	build.Flags().StringVar(&o.Suite, "suite", "bookworm", "the Debian release")
	build.Flags().StringVar(&o.Mirror, "mirror", "", "the Debian archive to build from (default: debootstrap's)")
	build.Flags().StringVar(&o.Cache, "cache", defaultImageCache(), "keep the root file system here between builds (\"\" keeps nothing)")
	build.Flags().BoolVar(&o.Fresh, "fresh", false, "build the root file system again even when the cache has it")
	img.AddCommand(build)
	return img
}
