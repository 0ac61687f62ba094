package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/internal/printable"
)

func newBoxes(env Env, s Streams) *cobra.Command {
	var o listOptions
	listBoxes := func() error { return runBoxesList(env, s, o) }
	list := noArgsCommand("list", "List your boxes and their states", listBoxes)
	list.Aliases = []string{"ls"}
	addEndpointFlag(list, &o.Endpoint)
	list.Flags().BoolVar(&o.JSON, "json", false, "print one JSON object per box")
	boxes := noArgsCommand("boxes", "List and manage boxes", listBoxes)
	boxes.SuggestFor = []string{"box", "list", "ls"}
	boxes.Flags().AddFlagSet(list.Flags())
	dial := func() (*box.Client, error) { return env.dial(o.Endpoint) }
	var sleepYes bool
	sleep := boxCommand(s, dial, "sleep BOX [--yes]", "Hibernate a box; the next command wakes it", func(c *box.Client, s Streams, name string) error {
		if !sleepYes {
			if err := checkOffloads(c, name, "sleep", false, true); err != nil {
				return err
			}
		}
		return sleepBox(c, s, name)
	})
	sleep.Flags().BoolVarP(&sleepYes, "yes", "y", false, "sleep even when an offloaded session is working (it is paused)")
	wake := boxCommand(s, dial, "wake BOX", "Wake a box, or start a stopped one", wakeBox)
	var image string
	create := boxCommand(s, dial, "create NAME [--image IMAGE]", "Create a box of yours", func(c *box.Client, s Streams, name string) error { return createBox(c, s, name, image) })
	create.Flags().StringVar(&image, "image", "", "the image the box runs (default: the server's latest)")
	var yes, force bool
	del := &cobra.Command{
		Use:     "delete BOX --yes [--force]",
		Aliases: []string{"rm"},
		Short:   "Delete a box and everything in it: its commands end, its home and workspace are removed",
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(_ *cobra.Command, a []string) error {
			if !yes {
				return &ExitError{Code: ExitNeedsYes, Err: fmt.Errorf("deleting box %s ends its commands and removes its home and workspace for good; to do it: cocoonbox boxes delete %s --yes", printable.Line(a[0], 80), printable.Line(a[0], 80))}
			}
			return withClient(env.dial(o.Endpoint))(func(c *box.Client) error {
				if err := checkOffloads(c, a[0], "delete", force, false); err != nil {
					return err
				}
				return deleteBox(c, s, a[0])
			})
		},
	}
	del.Flags().BoolVar(&yes, "yes", false, "confirm: the box's files are deleted for good")
	del.Flags().BoolVar(&force, "force", false, "delete even a box whose offloaded session works or holds work not brought back")
	addEndpointFlag(create, &o.Endpoint)
	for _, c := range []*cobra.Command{sleep, wake, del} {
		c.ValidArgsFunction = onlyFirst(boxNames(env, &o.Endpoint))
		addEndpointFlag(c, &o.Endpoint)
	}
	boxes.AddCommand(list, create, del, sleep, wake)
	boxesOps(env, s, boxes, &o.Endpoint)
	return boxes
}

// boxCommand is the command use (its one argument a box's name), which
// runs run with a client from dial, closed after.
func boxCommand(s Streams, dial func() (*box.Client, error), use, short string, run func(c *box.Client, s Streams, name string) error) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(_ *cobra.Command, a []string) error {
			return withClient(dial())(func(c *box.Client) error { return run(c, s, a[0]) })
		},
	}
}

// withClient runs f with a client made by a dial, then closes it.
func withClient(c *box.Client, err error) func(func(*box.Client) error) error {
	return func(f func(*box.Client) error) error {
		if err != nil {
			return err
		}
		defer c.Close()
		return f(c)
	}
}

func sleepBox(c *box.Client, s Streams, name string) error {
	b, err := c.Hibernate(context.Background(), name)
	if err != nil {
		return err
	}
	fmt.Fprintf(s.Err, "box %s: %s\n", b.Name, b.State)
	return nil
}

func createBox(c *box.Client, s Streams, name, image string) error {
	b, err := c.Create(context.Background(), name, image)
	if errors.Is(err, box.ErrInvalidArgument) {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(s.Err, "box %s created (%s, %s): %s\n", b.Name, b.ID, b.Image, b.State)
	return nil
}

func deleteBox(c *box.Client, s Streams, name string) error {
	id, err := c.Delete(context.Background(), name)
	if err != nil {
		return err
	}
	fmt.Fprintf(s.Err, "box %s deleted (%s)\n", printable.Line(name, 80), id)
	return nil
}

func wakeBox(c *box.Client, s Streams, name string) error {
	b, err := c.Ensure(context.Background(), name, s.Err)
	if err != nil {
		return err
	}
	fmt.Fprintf(s.Err, "box %s: %s\n", b.Name, b.State)
	return nil
}

func runBoxesList(env Env, s Streams, o listOptions) error {
	return listFrom(env, s, o.Endpoint, o.JSON, (*box.Client).List, boxObject, "NAME\tSTATE\tIMAGE\tID", func(b box.Box) string {
		return fmt.Sprintf("%s\t%s\t%s\t%s", b.Name, b.State, b.Image, b.ID)
	})
}

// boxObject is a box as --json prints it: the contract's field names.
func boxObject(b box.Box) map[string]any {
	return map[string]any{
		"box_id": b.ID, "name": b.Name, "state": b.State, "image": b.Image,
		"latest_image": b.LatestImage, "last_saved_at_ms": b.LastSavedAtMS,
	}
}
