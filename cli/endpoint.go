package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cocoonbox/cocoonbox/box"
	"github.com/cocoonbox/cocoonbox/internal/printable"
)

// listOptions are the flags of the commands that list what an endpoint
// holds: `cocoonbox boxes list` (whose --endpoint the other boxes
// commands share) and `cocoonbox devices` (and devices revoke's).
type listOptions struct {
	Endpoint string
	JSON     bool
}

// addEndpointFlag adds --endpoint, into p, to c: the endpoint of a command
// that talks to the API.
func addEndpointFlag(c *cobra.Command, p *string) {
	c.Flags().StringVar(p, "endpoint", "", "the API endpoint (default: $COCOONBOX_ENDPOINT, then the saved one)")
}

// withEndpoint dials endpoint ("" for the current one, env.dial's) and
// runs f with the client and a context that ends a minute later; then it
// closes the client.
func (e Env) withEndpoint(endpoint string, f func(ctx context.Context, c *box.Client) error) error {
	c, err := e.dial(endpoint)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return f(ctx, c)
}

// withCurrent dials the current endpoint and runs f with the client, a
// context that Ctrl-C or SIGTERM ends (signalExitContext), and the func
// that tells the exit status the signal calls for (0 before any); then it
// stops the context and closes the client.
func (e Env) withCurrent(f func(ctx context.Context, c *box.Client, code func() int) error) error {
	c, err := e.dial("")
	if err != nil {
		return err
	}
	ctx, stop, code := signalExitContext()
	defer func() { stop(); c.Close() }()
	return f(ctx, c, code)
}

// listFrom is a list command's work: it dials endpoint, fetches the
// items with a call of the client (a method such as (*box.Client).List),
// and prints them to s.Out with printList.
func listFrom[T any](env Env, s Streams, endpoint string, asJSON bool, fetch func(*box.Client, context.Context) ([]T, error), object func(T) map[string]any, header string, row func(T) string) error {
	return env.withEndpoint(endpoint, func(ctx context.Context, c *box.Client) error {
		items, err := fetch(c, ctx)
		if err != nil {
			return err
		}
		return printList(s.Out, asJSON, items, object, header, row)
	})
}

// writeJSON writes v to w as one line of JSON, as json.Encoder does, with
// the runes a terminal would act on escaped (printable.JSON): every
// --json output of ours carries names and text a box or a server chose.
func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(printable.JSON(b), '\n'))
	return err
}

// printList writes items to w as the list commands do (boxes list,
// devices, localbox account list): with asJSON one JSON object per line
// (object's), else a table whose columns line up, the header first and
// then one row per item (row's; both tab-separated).
func printList[T any](w io.Writer, asJSON bool, items []T, object func(T) map[string]any, header string, row func(T) string) error {
	if asJSON {
		for _, it := range items {
			if err := writeJSON(w, object(it)); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, it := range items {
		fmt.Fprintln(tw, row(it))
	}
	return tw.Flush()
}
