package agentwire

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
)

// roundTrip parses req's argv with a cobra command built from v as
// cocoonbox-agent builds its verbs (flags bound by Bind), and checks that
// the command gets back req and the verb's name; want, when not nil, is
// the argv itself, as the laptop half has always written it.
func roundTrip[Req any](t *testing.T, v Verb[Req], req Req, want []string) {
	t.Helper()
	argv := v.Argv(req)
	if want != nil && !slices.Equal(argv, want) {
		t.Errorf("%s: Argv = %q, want %q", v.Name, argv, want)
	}
	var got Req
	ran := ""
	root := &cobra.Command{Use: Program, SilenceErrors: true, SilenceUsage: true}
	off := &cobra.Command{Use: "offload"}
	c := &cobra.Command{Use: v.Use, Args: cobra.MaximumNArgs(v.MaxArgs), RunE: func(c *cobra.Command, _ []string) error {
		ran = c.Name()
		return nil
	}}
	v.Bind(c.Flags(), &got)
	off.AddCommand(c)
	root.AddCommand(off)
	root.SetArgs(argv)
	if err := root.Execute(); err != nil {
		t.Fatalf("%s: %q: %v", v.Name, argv, err)
	}
	if ran != v.Name {
		t.Errorf("%q ran %q, want %q", argv, ran, v.Name)
	}
	if diff := cmp.Diff(req, got); diff != "" {
		t.Errorf("%s: %q parsed (-sent +got):\n%s", v.Name, argv, diff)
	}
}

// TestArgvRoundTrip writes each verb's requests as argv, the offload
// ones as offload/agent.go has always sent them, and parses them back.
func TestArgvRoundTrip(t *testing.T) {
	w := func(s string) []string { return strings.Fields(s) }
	roundTrip(t, Begin, BeginRequest{Repo: "k1", Name: "my-app", Kind: "claude", ID: "0123abc"},
		w("offload begin --repo k1 --name my-app --kind claude --id 0123abc"))
	roundTrip(t, Begin, BeginRequest{Repo: "k1", Name: "n", Kind: "codex", ID: "i", NoRepo: true}, nil)
	roundTrip(t, Send, SendRequest{Repo: "k1", Kind: "codex", ID: "i"}, w("offload send --repo k1 --kind codex --id i"))
	roundTrip(t, Send, SendRequest{Repo: "k1", Kind: "codex", ID: "i", Prepare: true, NoRepo: true}, nil)
	roundTrip(t, Send, SendRequest{Repo: "k1", Message: true}, w("offload send --repo k1 --message"))
	roundTrip(t, Send, SendRequest{Repo: "k1", Back: true}, w("offload send --repo k1 --back"))
	roundTrip(t, Send, SendRequest{Repo: "k1", Back: true, Interrupt: true}, w("offload send --repo k1 --back --interrupt"))
	roundTrip(t, Read, ReadRequest{Repo: "k1"}, w("offload read --repo k1 --since 0"))
	roundTrip(t, Read, ReadRequest{Repo: "k1", Since: 12, Wait: 60}, w("offload read --repo k1 --since 12 --wait 60"))
	roundTrip(t, Status, RepoRequest{}, w("offload status"))
	roundTrip(t, Status, RepoRequest{Repo: "k1"}, w("offload status --repo k1"))
	roundTrip(t, End, RepoRequest{Repo: "k1"}, w("offload end --repo k1"))
	roundTrip(t, WipeSecrets, RepoRequest{Repo: "k1"}, w("offload wipe-secrets --repo k1"))
	roundTrip(t, Restart, RepoRequest{Repo: "k1"}, w("offload restart --repo k1"))
	roundTrip(t, Post, PostRequest{Question: true}, w("offload post --question"))
	roundTrip(t, Post, PostRequest{Repo: "k1", Back: true}, nil)
	roundTrip(t, Post, PostRequest{Progress: true}, nil)
	roundTrip(t, Env, EnvRequest{Repo: "k1", NoWait: true, JSON: true}, nil)
	roundTrip(t, Event, EventRequest{Repo: "k1", CLI: "codex", Hook: "notify"}, w("offload event --repo k1 --cli codex --hook notify"))
	roundTrip(t, Serve, ServeRequest{}, w("offload serve"))
	// A value that looks like a flag stays one word of its flag.
	roundTrip(t, Begin, BeginRequest{Repo: "-k", Name: "--x", Kind: "", ID: "a b"}, nil)
}

// defaults is a request type of defaults and an Always flag, which no
// verb has yet.
type defaults struct {
	S string `flag:"s" default:"x" help:"s"`
	N int    `flag:"n" default:"7" help:"n"`
	B bool   `flag:"b" default:"true" help:"b"`
	A int    `flag:"a,always" help:"a"`
}

func TestDefaults(t *testing.T) {
	v := Verb[defaults]{Name: "d", Use: "d"}
	roundTrip(t, v, defaults{S: "x", N: 7, B: true}, []string{"offload", "d", "--a", "0"})
	roundTrip(t, v, defaults{S: "y", N: 8, B: false, A: 1}, []string{"offload", "d", "--s", "y", "--n", "8", "--b=false", "--a", "1"})
}

// TestVerbsTable checks the table itself: names unique, every field of
// a request a flag of a supported type with help, every answer a struct
// whose first field is "ok".
func TestVerbsTable(t *testing.T) {
	seen := map[string]bool{}
	for _, v := range Verbs() {
		if seen[v.Name] {
			t.Errorf("verb %s twice", v.Name)
		}
		seen[v.Name] = true
		if !strings.HasPrefix(v.Use, v.Name) || v.Short == "" {
			t.Errorf("%s: Use %q, Short %q", v.Name, v.Use, v.Short)
		}
		if len(v.Flags) != v.Request.NumField() {
			t.Errorf("%s: %d flags for the %d fields of %s", v.Name, len(v.Flags), v.Request.NumField(), v.Request)
		}
		for _, f := range v.Flags {
			if f.Help == "" || (f.Type != reflect.String && f.Type != reflect.Bool && f.Type != reflect.Int) {
				t.Errorf("%s --%s: type %s, help %q", v.Name, f.Name, f.Type, f.Help)
			}
		}
		if len(v.Results) == 0 {
			t.Errorf("%s: no result type", v.Name)
		}
		for _, r := range v.Results {
			if r.Kind() != reflect.Struct || r.NumField() == 0 || r.Field(0).Tag.Get("json") != "ok" {
				t.Errorf("%s: result %s does not open with ok", v.Name, r)
			}
		}
	}
}
