package localbox

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables"
)

// The host firewall's table as the kernel holds it: each chain's rule
// count, the boxes set's interfaces, the ports set's ports. Made again
// (a start after a kill -9) it is the same, no rule twice; a bridge
// removed leaves the set; close leaves no table.
func TestHostFirewallReplacesWhole(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("nftables needs root (CI runs as root)")
	}
	table := fmt.Sprintf("cocoonbox-test-%d", os.Getpid())
	t.Cleanup(func() { removeFirewall(table) })
	f := newHostFirewall(table, 20001, true)
	if err := f.install([]string{"cbxaaaaaaaaaaaa"}); err != nil {
		t.Fatal(err)
	}
	if err := f.add("cbxbbbbbbbbbbbb"); err != nil {
		t.Fatal(err)
	}
	if err := f.allowPort(20002); err != nil {
		t.Fatal(err)
	}
	want := "chain forward 3 rules\nchain input 6 rules\nbox cbxaaaaaaaaaaaa\nbox cbxbbbbbbbbbbbb\nport 20001\nport 20002"
	if got := listFirewall(t, table); got != want {
		t.Fatalf("table after install, add:\n%s\nwant:\n%s", got, want)
	}
	// The next server's start: what the engine has, the same table.
	g := newHostFirewall(table, 20001, true)
	if err := g.install([]string{"cbxaaaaaaaaaaaa", "cbxbbbbbbbbbbbb"}); err != nil {
		t.Fatal(err)
	}
	if err := g.allowPort(20002); err != nil {
		t.Fatal(err)
	}
	if got := listFirewall(t, table); got != want {
		t.Fatalf("table installed again:\n%s\nwant:\n%s", got, want)
	}
	if err := g.remove("cbxaaaaaaaaaaaa"); err != nil {
		t.Fatal(err)
	}
	if err := g.remove("cbxaaaaaaaaaaaa"); err != nil {
		t.Errorf("remove of a bridge not there: %v", err)
	}
	if got := listFirewall(t, table); strings.Contains(got, "cbxaaaaaaaaaaaa") {
		t.Errorf("removed bridge still in the table:\n%s", got)
	}
	if err := g.close(); err != nil {
		t.Fatal(err)
	}
	c, _ := nftables.New()
	if _, err := c.ListTableOfFamily(table, nftables.TableFamilyINet); err == nil {
		t.Errorf("table %s still there after close", table)
	}
	if err := g.close(); err != nil {
		t.Errorf("close with no table: %v", err)
	}
}

func listFirewall(t *testing.T, table string) string {
	t.Helper()
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	tb, err := c.ListTableOfFamily(table, nftables.TableFamilyINet)
	if err != nil {
		t.Fatal(err)
	}
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		t.Fatal(err)
	}
	var cs []string
	for _, ch := range chains {
		if ch.Table.Name != table {
			continue
		}
		rs, err := c.GetRules(tb, ch)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, fmt.Sprintf("chain %s %d rules", ch.Name, len(rs)))
	}
	slices.Sort(cs)
	var es []string
	for _, name := range []string{"boxes", "ports"} {
		s, err := c.GetSetByName(tb, name)
		if err != nil {
			t.Fatal(err)
		}
		els, err := c.GetSetElements(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range els {
			if name == "boxes" {
				es = append(es, "box "+strings.TrimRight(string(e.Key), "\x00"))
			} else {
				es = append(es, fmt.Sprintf("port %d", int(e.Key[0])<<8|int(e.Key[1])))
			}
		}
	}
	slices.Sort(es)
	return strings.Join(append(cs, es...), "\n")
}
