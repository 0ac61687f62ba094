package agentcmd

import (
	"os"
	"slices"
	"testing"

	"github.com/spf13/pflag"

	"github.com/cocoonbox/cocoonbox/agentwire"
)

// TestAgentVerbs checks that cocoonbox-agent offload has one command per
// verb of agentwire's table, each with the table's flags in its order.
func TestAgentVerbs(t *testing.T) {
	none := Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}
	root := Root(Env{Getenv: func(string) string { return "" }}, none)
	off, _, err := root.Find([]string{"offload"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range off.Commands() {
		got = append(got, c.Name())
	}
	var want []string
	for _, v := range agentwire.Verbs() {
		want = append(want, v.Name)
		c, _, err := off.Find([]string{v.Name})
		if err != nil || c == off {
			continue
		}
		var flags, table []string
		c.LocalFlags().VisitAll(func(f *pflag.Flag) { flags = append(flags, f.Name+" "+f.DefValue+" "+f.Usage) })
		for _, f := range v.Flags {
			table = append(table, f.Name+" "+f.Default+" "+f.Help)
		}
		if !slices.Equal(flags, table) {
			t.Errorf("%s: flags %q, table %q", v.Name, flags, table)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("offload verbs %q, table %q", got, want)
	}
}
