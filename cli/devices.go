package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/internal/printable"
)

func newDevices(env Env, s Streams) *cobra.Command {
	var o listOptions
	c := &cobra.Command{
		Use:   "devices",
		Short: "List the devices signed in to your account (* marks this one)",
		Long: `devices lists the sign-ins of your account: ID, NAME, CLIENT, when it was
created and last used (kept to the minute). * marks the one this CLI uses.
"devices revoke ID" revokes one; its open calls end at once.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error { return runDevices(env, s, o) },
	}
	addEndpointFlag(c, &o.Endpoint)
	c.Flags().BoolVar(&o.JSON, "json", false, "print one JSON object per device")
	revoke := &cobra.Command{
		Use:               "revoke ID",
		Short:             "Revoke a device's token; its open calls end",
		Args:              usageArgs(cobra.ExactArgs(1)),
		RunE:              func(_ *cobra.Command, a []string) error { return runDevicesRevoke(env, s, o, a[0]) },
		ValidArgsFunction: deviceIDs(env, &o.Endpoint),
	}
	addEndpointFlag(revoke, &o.Endpoint)
	c.AddCommand(revoke)
	return c
}

func runDevices(env Env, s Streams, o listOptions) error {
	return listFrom(env, s, o.Endpoint, o.JSON, (*box.Client).ListDevices, func(d box.Device) map[string]any {
		return map[string]any{
			"id": d.ID, "name": d.Name, "client": d.Client, "created_at_ms": d.CreatedAtMS,
			"last_used_at_ms": d.LastUsedAtMS, "current": d.Current,
		}
	}, "\tID\tNAME\tCLIENT\tCREATED\tLAST USED", func(d box.Device) string {
		mark := ""
		if d.Current {
			mark = "*"
		}
		return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", mark, d.ID, printable.Line(d.Name, 64), printable.Line(d.Client, 64), when(d.CreatedAtMS), when(d.LastUsedAtMS))
	})
}

func when(ms int64) string {
	if ms == 0 {
		return "never"
	}
	return time.UnixMilli(ms).Local().Format("2006-01-02 15:04")
}

func runDevicesRevoke(env Env, s Streams, o listOptions, id string) error {
	ep, err := box.ResolveEndpoint(o.Endpoint, env.Getenv)
	if err != nil {
		return err
	}
	return env.withEndpoint(o.Endpoint, func(ctx context.Context, c *box.Client) error {
		devs, err := c.ListDevices(ctx)
		if err != nil {
			return err
		}
		if err := c.RevokeDevice(ctx, id); err != nil {
			return err
		}
		fmt.Fprintf(s.Err, "device %s revoked\n", printable.Line(id, 64))
		for _, d := range devs {
			if d.ID == id && d.Current && env.Getenv("COCOONBOX_TOKEN") == "" {
				st, err := env.store()
				if err != nil {
					return err
				}
				if err := st.Delete(ep.URL); err != nil {
					return err
				}
				fmt.Fprintln(s.Err, "it was this CLI's own sign-in: the saved token is deleted")
			}
		}
		return nil
	})
}
