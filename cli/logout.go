package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/cocoonbox/cocoonbox/auth"
	"github.com/cocoonbox/cocoonbox/box"
)

// logoutOptions are the flags of `cocoonbox logout`.
type logoutOptions struct {
	Endpoint   string
	Everywhere bool
}

func newLogout(env Env, s Streams) *cobra.Command {
	var o logoutOptions
	c := &cobra.Command{
		Use:        "logout",
		SuggestFor: []string{"signout"},
		Short:      "Sign out: revoke the browser sign-in's token and delete the saved one",
		Long: `logout deletes the token saved for the endpoint. A token the CLI got
through the browser is revoked first, so it stops working everywhere; a
personal key given with --token - is only deleted here. --everywhere signs
the whole account out at once: every device, every key, and every call
open on them.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error { return runLogout(env, s, o) },
	}
	addEndpointFlag(c, &o.Endpoint)
	c.Flags().BoolVar(&o.Everywhere, "everywhere", false, "revoke every token of the account, this one included")
	return c
}

func runLogout(env Env, s Streams, o logoutOptions) error {
	ep, err := box.ResolveEndpoint(o.Endpoint, env.Getenv)
	if err != nil {
		return err
	}
	// The masters hold no token, but a signed-out user expects nothing
	// of the session left.
	defer env.stopSharing(ep)
	st, err := env.store()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if o.Everywhere {
		c, err := env.dial(o.Endpoint)
		if err != nil {
			return err
		}
		defer c.Close()
		n, err := c.SignOutEverywhere(ctx)
		if err != nil {
			return err
		}
		if err := st.Delete(ep.URL); err != nil {
			return err
		}
		fmt.Fprintf(s.Err, "signed out everywhere at %s: %d tokens revoked\n", ep.URL, n)
		return nil
	}
	cred, err := st.Get(ep.URL)
	if errors.Is(err, auth.ErrNoToken) {
		fmt.Fprintf(s.Err, "not signed in at %s\n", ep.URL)
		return nil
	}
	if err != nil {
		return err
	}
	var rerr error
	if cred.Source == auth.SourceBrowser {
		hc, err := box.HTTPClient(ep, 30*time.Second)
		if err != nil {
			return err
		}
		rerr = auth.Revoke(ctx, hc, ep.URL, cred.Token)
	}
	if err := st.Delete(ep.URL); err != nil {
		return err
	}
	if rerr != nil {
		return fmt.Errorf("the saved token is deleted, but it could not be revoked: %w\nrevoke the device from another sign-in: cocoonbox devices revoke ID", rerr)
	}
	if cred.Source == auth.SourceBrowser {
		fmt.Fprintf(s.Err, "signed out of %s; the device token is revoked\n", ep.URL)
	} else {
		fmt.Fprintf(s.Err, "signed out of %s; the saved token (from %s) is deleted, not revoked\n", ep.URL, cred.Source)
	}
	if env.Getenv("COCOONBOX_TOKEN") != "" {
		fmt.Fprintln(s.Err, "note: COCOONBOX_TOKEN is still set in the environment")
	}
	return nil
}
