package cli_test

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/nftables"
	"github.com/rogpeppe/go-internal/testscript"
)

// nftable TABLE prints the inet table TABLE of this machine's nftables
// (a local box's firewall): each chain with its number of rules, and
// the elements of its boxes set (interface names), sorted. Negated, it
// checks that there is no such table.
func nftable(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: nftable TABLE")
	}
	c, err := nftables.New()
	ts.Check(err)
	t, err := c.ListTableOfFamily(args[0], nftables.TableFamilyINet)
	if neg {
		if err == nil {
			ts.Fatalf("nftables table inet %s is there", args[0])
		}
		return
	}
	ts.Check(err)
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
	ts.Check(err)
	var out []string
	for _, ch := range chains {
		if ch.Table.Name != t.Name {
			continue
		}
		rs, err := c.GetRules(t, ch)
		ts.Check(err)
		out = append(out, fmt.Sprintf("chain %s %d rules", ch.Name, len(rs)))
	}
	s, err := c.GetSetByName(t, "boxes")
	ts.Check(err)
	es, err := c.GetSetElements(s)
	ts.Check(err)
	for _, e := range es {
		out = append(out, "box "+strings.TrimRight(string(e.Key), "\x00"))
	}
	slices.Sort(out)
	fmt.Fprintln(ts.Stdout(), strings.Join(out, "\n"))
}

// nftdelete TABLE deletes the inet table TABLE, as an `nft flush
// ruleset` would, and waits (a bound, not a measure: 60 s) for the
// running local box to make it again; it fails if it does not.
func nftdelete(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: nftdelete TABLE")
	}
	c, err := nftables.New()
	ts.Check(err)
	c.DelTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: args[0]})
	ts.Check(c.Flush())
	for i := 0; i < 600; i++ {
		if _, err := c.ListTableOfFamily(args[0], nftables.TableFamilyINet); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	ts.Fatalf("nftables table inet %s not made again", args[0])
}
