package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/internal/printable"
	"github.com/cocoonbox/cocoonbox/offload"
)

// The boxes verbs beside list, create, delete, sleep and wake: status,
// save, upgrade and usage; and the offload check that delete, upgrade and
// sleep run first, so that none costs work an offload left in the box.

// boxesOps adds status, save, upgrade and usage to boxes.
func boxesOps(env Env, s Streams, boxes *cobra.Command, endpoint *string) {
	var jsonOut, force bool
	dial := func() (*box.Client, error) { return env.dial(*endpoint) }
	status := &cobra.Command{
		Use:   "status BOX [--json]",
		Short: "Show a box's state, image, latest image and last save, without waking it",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(_ *cobra.Command, a []string) error {
			return withClient(dial())(func(c *box.Client) error {
				b, err := c.Status(context.Background(), a[0])
				if err != nil {
					return err
				}
				if jsonOut {
					return writeJSON(s.Out, map[string]any{"box_id": b.ID, "name": b.Name, "state": b.State, "image": b.Image,
						"latest_image": b.LatestImage, "upgrade_available": b.UpgradeAvailable, "last_saved_at_ms": b.LastSavedAtMS})
				}
				saved := "never"
				if b.LastSavedAtMS > 0 {
					saved = time.UnixMilli(b.LastSavedAtMS).Format(time.RFC3339)
				}
				up := ""
				if b.UpgradeAvailable {
					up = " (upgrade available: cocoonbox boxes upgrade " + b.Name + ")"
				}
				fmt.Fprintf(s.Out, "box %s (%s): %s\nimage: %s, latest %s%s\nlast saved: %s\n", b.Name, b.ID, b.State, b.Image, b.LatestImage, up, saved)
				return nil
			})
		},
	}
	status.Flags().BoolVar(&jsonOut, "json", false, "print the status as one JSON object")
	save := boxCommand(s, dial, "save BOX", "Save a box now; a running box keeps running, a hibernated one is not woken", func(c *box.Client, s Streams, name string) error {
		r, err := c.Save(context.Background(), name, s.Err)
		if err != nil {
			return err
		}
		fmt.Fprintf(s.Err, "box %s saved at %s (%d bytes)\n", r.Box.Name, time.UnixMilli(r.Box.LastSavedAtMS).Format(time.RFC3339), r.Bytes)
		return nil
	})
	upgrade := boxCommand(s, dial, "upgrade BOX [--force]", "Move a box to the latest image; home and workspace stay, what runs in it restarts", func(c *box.Client, s Streams, name string) error {
		if err := checkOffloads(c, name, "upgrade", force, false); err != nil {
			return err
		}
		r, err := c.Upgrade(context.Background(), name, s.Err)
		if err != nil {
			return err
		}
		if r.OperationID == "" {
			fmt.Fprintf(s.Err, "box %s runs the latest image already (%s)\n", r.Box.Name, r.Box.Image)
			return nil
		}
		fmt.Fprintf(s.Err, "box %s upgraded to %s: %s\n", r.Box.Name, r.Box.Image, r.Box.State)
		return nil
	})
	upgrade.Flags().BoolVar(&force, "force", false, "upgrade even a box whose offloaded session works or holds work not brought back")
	usage := noArgsCommand("usage", "Show your account's model usage and daily cap", func() error {
		return withClient(dial())(func(c *box.Client) error {
			u, err := c.Usage(context.Background())
			if err != nil {
				return err
			}
			if jsonOut {
				return writeJSON(s.Out, map[string]any{"today": u.Today, "month": u.Month, "daily_cap_micros": u.DailyCapMicros,
					"default_cap": u.DefaultCap, "remaining_today_micros": u.RemainingTodayMicros, "unmeasured": u.Unmeasured})
			}
			if len(u.Unmeasured) > 0 {
				fmt.Fprintf(s.Out, "this endpoint does not measure: %s\n", strings.Join(u.Unmeasured, ", "))
			}
			fmt.Fprintf(s.Out, "today %s, this month %s, daily cap %s, left today %s\n", dollars(u.Today), dollars(u.Month), capText(u), dollars(u.RemainingTodayMicros))
			return nil
		})
	})
	usage.Flags().BoolVar(&jsonOut, "json", false, "print the usage as one JSON object")
	for _, c := range []*cobra.Command{status, save, upgrade, usage} {
		addEndpointFlag(c, endpoint)
	}
	for _, c := range []*cobra.Command{status, save, upgrade} {
		c.ValidArgsFunction = onlyFirst(boxNames(env, endpoint))
	}
	boxes.AddCommand(status, save, upgrade, usage)
}

func dollars(micros int64) string { return fmt.Sprintf("$%.2f", float64(micros)/1e6) }

func capText(u box.Usage) string {
	if u.DailyCapMicros == 0 {
		return "none"
	}
	return dollars(u.DailyCapMicros)
}

// checkOffloads reads the offload status of box name before a verb that
// would cost its offloads work: delete and upgrade (holdsWork) refuse a
// box whose session works or whose copy holds work not brought back
// (exit 3, naming the repositories), unless force; sleep (holdsWork
// false) asks for --yes (exit 4) when a session works. A hibernated box
// is not woken to look: delete and upgrade refuse it unless force, since
// its offloads cannot be read asleep; sleep has nothing to do.
func checkOffloads(c *box.Client, name, verb string, force, sleep bool) error {
	if force {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := c.StatusFor(ctx, name, verb+" "+name)
	if errors.Is(err, box.ErrNotFound) {
		return nil // the verb itself says so
	}
	if err != nil {
		return err
	}
	q := printable.Line(name, 80)
	if b.State != "running" {
		if sleep {
			return nil
		}
		return &ExitError{Code: ExitRefused, Err: fmt.Errorf("box %s is %s, so its offloads cannot be checked without waking it; wake it (cocoonbox boxes wake %s) and run this again, or %s it anyway with --force", q, b.State, q, verb)}
	}
	ss, err := (&offload.Agent{Exec: c, Box: name}).Status(ctx, "")
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = errors.New("the box did not answer")
		}
		// sleep's override is --yes: it has no --force.
		override := "--force"
		if sleep {
			override = "--yes"
		}
		return &ExitError{Code: ExitRefused, Err: fmt.Errorf("cannot read the offload status of box %s (%v); nothing changed; %s it anyway with %s", q, err, verb, override)}
	}
	var held, working []string
	for _, x := range ss {
		repo := printable.Line(x.Name, 80)
		if x.Status == "working" {
			working = append(working, repo)
		}
		if x.Copy == "unreturned" || x.Copy == "busy" {
			held = append(held, repo)
		}
	}
	if sleep {
		if len(working) > 0 {
			return &ExitError{Code: ExitNeedsYes, Err: fmt.Errorf("an offloaded session is working in box %s (%s); sleep pauses it until the box wakes; to do it: cocoonbox boxes sleep %s --yes", q, strings.Join(working, ", "), q)}
		}
		return nil
	}
	if len(held) > 0 || len(working) > 0 {
		repos := dedupe(append(working, held...))
		what := "holds offloaded work not brought back"
		if len(working) > 0 {
			what = "has an offloaded session working"
		}
		return &ExitError{Code: ExitRefused, Err: fmt.Errorf("box %s %s (%s); bring it home first (cocoonbox back in each repository), or %s anyway with --force; nothing changed", q, what, strings.Join(repos, ", "), verb)}
	}
	return nil
}

func dedupe(xs []string) []string {
	var out []string
	for _, x := range xs {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}
