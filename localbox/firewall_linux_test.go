package localbox

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
)

// The host firewall's table as the kernel holds it: each chain's rule
// count, the boxes set's interfaces, the ports set's ports. Made again
// (a start after a kill -9) it is the same, no rule twice; a bridge
// removed leaves the set; a port the proxy no longer listens on leaves
// it; close leaves no table.
func TestHostFirewallReplacesWhole(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("nftables needs root (CI runs as root)")
	}
	table := fmt.Sprintf("cocoonbox-test-%d", os.Getpid())
	t.Cleanup(func() { removeFirewall(table) })
	f := newHostFirewall(table, true)
	if err := f.install([]string{"cbxaaaaaaaaaaaa"}); err != nil {
		t.Fatal(err)
	}
	if err := f.add("cbxbbbbbbbbbbbb"); err != nil {
		t.Fatal(err)
	}
	if err := f.setPorts([]uint16{20001, 20002}); err != nil {
		t.Fatal(err)
	}
	want := "chain forward 3 rules\nchain input 6 rules\nbox cbxaaaaaaaaaaaa\nbox cbxbbbbbbbbbbbb\nport 20001\nport 20002"
	if got := listFirewall(t, table); got != want {
		t.Fatalf("table after install, add:\n%s\nwant:\n%s", got, want)
	}
	// The next server's start: what the engine has, the same table.
	g := newHostFirewall(table, true)
	if err := g.install([]string{"cbxaaaaaaaaaaaa", "cbxbbbbbbbbbbbb"}); err != nil {
		t.Fatal(err)
	}
	if err := g.setPorts([]uint16{20001, 20002}); err != nil {
		t.Fatal(err)
	}
	if got := listFirewall(t, table); got != want {
		t.Fatalf("table installed again:\n%s\nwant:\n%s", got, want)
	}
	if err := g.setPorts([]uint16{20002}); err != nil {
		t.Fatal(err)
	}
	if got := listFirewall(t, table); strings.Contains(got, "port 20001") {
		t.Errorf("a port the proxy left still in the table:\n%s", got)
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

// A table deleted while the boxes run (an `nft flush ruleset`) is made
// again, whole, also after the watch's monitor ended; after close it stays gone, whatever a box deleted or
// started then does.
func TestHostFirewallWatchRestores(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("nftables needs root (CI runs as root)")
	}
	table := fmt.Sprintf("cocoonbox-test-w%d", os.Getpid())
	t.Cleanup(func() { removeFirewall(table) })
	f := newHostFirewall(table, false)
	if err := f.install([]string{"cbxaaaaaaaaaaaa"}); err != nil {
		t.Fatal(err)
	}
	if err := f.setPorts([]uint16{20001}); err != nil {
		t.Fatal(err)
	}
	want := listFirewall(t, table)
	if err := f.watch(t.Logf); err != nil {
		t.Fatal(err)
	}
	if err := removeFirewall(table); err != nil {
		t.Fatal(err)
	}
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	// The watcher answers the deletion's event; wait for it (a bounded
	// wait, not a measure), then the table is as it was.
	restored := func(after string) {
		t.Helper()
		for i := 0; i < 600; i++ {
			if _, err := c.ListTableOfFamily(table, nftables.TableFamilyINet); err == nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if got := listFirewall(t, table); got != want {
			t.Fatalf("table after %s:\n%s\nwant:\n%s", after, got, want)
		}
	}
	restored("its deletion")
	// Its monitor ended (as when its socket overflows): it watches on.
	f.mu.Lock()
	f.watching.Close()
	f.mu.Unlock()
	if err := removeFirewall(table); err != nil {
		t.Fatal(err)
	}
	restored("its deletion, its monitor ended")
	if err := f.close(); err != nil {
		t.Fatal(err)
	}
	// A box deleted or started as the local box stops makes no table.
	f.setPorts([]uint16{20002})
	if err := f.add("cbxcccccccccccc"); err == nil {
		t.Errorf("a bridge added after close")
	}
	if _, err := c.ListTableOfFamily(table, nftables.TableFamilyINet); err == nil {
		t.Errorf("table %s made again after close", table)
	}
}
