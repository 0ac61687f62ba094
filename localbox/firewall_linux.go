package localbox

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// hostFirewall fences a local box's container boxes off the host: an
// nftables table of its own (inet: IPv4 and IPv6), whose input chain
// lets a packet from a box's bridge reach the host only as a reply
// (established, related), or at the egress proxy's port on that
// bridge's own address over IPv4, where the proxy listens (and, on
// podman, its DNS server there); anything
// else a box sends to one of the host's addresses is refused. Its
// forward chain drops what one box's bridge sends to another's, which
// docker's own rules also drop but podman's netavark 1.4 does not, and
// what the host's NAT turned from one of its addresses to a container
// (a port published on the host).
//
// The table is the local box's alone (named as its containers are), so
// installing it again replaces the whole in one transaction: a start
// after a kill -9 leaves no second copy. Its boxes set holds the box
// bridges, its ports set the ports the proxy listens on now: no other
// (the local box's port when another process held it and the proxy
// took another, a deleted box's), where a host service would answer. nftables rather than the
// iptables command: a netlink library, no binary to find, the same on
// hosts whose iptables is legacy or nft, and the table coexists with
// the engine's rules (a drop in any base chain is final).
type hostFirewall struct {
	table string
	// dns lets boxes reach port 53 on their own bridge's address:
	// podman's resolver (aardvark-dns) answers there; docker's answers
	// inside the container.
	dns bool

	mu      sync.Mutex
	bridges map[string]bool
	ports   map[uint16]bool
	// watching holds watch's monitor while it runs; closed, watch's
	// goroutine makes the table no more.
	watching *nftables.Monitor
	closed   bool
}

// ipsDstNAT is conntrack's status bit of a connection whose destination
// NAT changed (IPS_DST_NAT, linux/netfilter/nf_conntrack_common.h).
const ipsDstNAT = 1 << 5

// firewallPrefix begins every box bridge's name: the forward chain drops
// between any two bridges of local boxes, this one's or another's.
const firewallPrefix = "cbx"

// newHostFirewall is the firewall of table (it does not touch the host
// until install), with no proxy port open until setPorts.
func newHostFirewall(table string, dns bool) *hostFirewall {
	return &hostFirewall{table: table, dns: dns, bridges: map[string]bool{}, ports: map[uint16]bool{}}
}

func (f *hostFirewall) tableRef() *nftables.Table {
	return &nftables.Table{Family: nftables.TableFamilyINet, Name: f.table}
}

// install makes the table afresh with bridges as its boxes, replacing
// one there is.
func (f *hostFirewall) install(bridges []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range bridges {
		f.bridges[b] = true
	}
	return f.installLocked()
}

func (f *hostFirewall) installLocked() error {
	c, err := nftables.New()
	if err != nil {
		return f.wrap(err)
	}
	t := f.tableRef()
	// Made if missing, so that the delete never fails: the three are one
	// transaction.
	c.AddTable(t)
	c.DelTable(t)
	c.AddTable(t)
	boxes := &nftables.Set{Table: t, Name: "boxes", KeyType: nftables.TypeIFName, KeyByteOrder: binaryutil.NativeEndian}
	var be []nftables.SetElement
	for b := range f.bridges {
		be = append(be, nftables.SetElement{Key: ifname(b)})
	}
	if err := c.AddSet(boxes, be); err != nil {
		return f.wrap(err)
	}
	ports := &nftables.Set{Table: t, Name: "ports", KeyType: nftables.TypeInetService}
	var pe []nftables.SetElement
	for p := range f.ports {
		pe = append(pe, nftables.SetElement{Key: binaryutil.BigEndian.PutUint16(p)})
	}
	if err := c.AddSet(ports, pe); err != nil {
		return f.wrap(err)
	}
	accept := nftables.ChainPolicyAccept
	in := c.AddChain(&nftables.Chain{Name: "input", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	fromBox := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Lookup{SourceRegister: 1, SetName: boxes.Name, SetID: boxes.ID},
	}
	rule := func(ch *nftables.Chain, parts ...[]expr.Any) {
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: slices.Concat(parts...)})
	}
	accepted := []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}}
	dropped := []expr.Any{&expr.Verdict{Kind: expr.VerdictDrop}}
	// A reply to what the host opened (the local box's own connections
	// into a box), and what a connection allowed below relates to.
	rule(in, fromBox, []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED), Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
	}, accepted)
	// The proxy, at the IPv4 address the box's own bridge holds.
	rule(in, fromBox, []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV4}},
	}, l4(unix.IPPROTO_TCP), []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Lookup{SourceRegister: 1, SetName: ports.Name, SetID: ports.ID},
	}, toOwnAddress, accepted)
	if f.dns {
		for _, p := range []byte{unix.IPPROTO_UDP, unix.IPPROTO_TCP} {
			rule(in, fromBox, l4(p), []expr.Any{
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(53)},
			}, toOwnAddress, accepted)
		}
	}
	// The rest: a TCP connection is reset (refused at once, as at a
	// closed port), anything else dropped.
	rule(in, fromBox, l4(unix.IPPROTO_TCP), []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_TCP_RST}})
	rule(in, fromBox, dropped)

	fwd := c.AddChain(&nftables.Chain{Name: "forward", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	// A box's connection to the host that the host's NAT sent on (a
	// port another container publishes on the host's addresses).
	rule(fwd, fromBox, []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATUS},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(ipsDstNAT), Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
	}, dropped)
	// From a box of this local box to any box bridge, and from any box
	// bridge to one of this local box's.
	rule(fwd, fromBox, []expr.Any{
		&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte(firewallPrefix)},
	}, dropped)
	rule(fwd, []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte(firewallPrefix)},
		&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
		&expr.Lookup{SourceRegister: 1, SetName: boxes.Name, SetID: boxes.ID},
	}, dropped)
	return f.wrap(c.Flush())
}

// add fences bridge, before its box's container starts. A table that
// went (`nft flush ruleset`) is made again whole.
func (f *hostFirewall) add(bridge string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bridges[bridge] = true
	return f.addLocked(&nftables.Set{Table: f.tableRef(), Name: "boxes", KeyType: nftables.TypeIFName}, ifname(bridge))
}

// setPorts makes ports the ports set, replacing what it held: the
// ports the egress proxy listens on now.
func (f *hostFirewall) setPorts(ports []uint16) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil // a box deleted as the local box stops: no table to make again
	}
	f.ports = map[uint16]bool{}
	var es []nftables.SetElement
	for _, p := range ports {
		f.ports[p] = true
		es = append(es, nftables.SetElement{Key: binaryutil.BigEndian.PutUint16(p)})
	}
	c, err := nftables.New()
	if err != nil {
		return f.wrap(err)
	}
	s := &nftables.Set{Table: f.tableRef(), Name: "ports", KeyType: nftables.TypeInetService}
	c.FlushSet(s)
	if len(es) > 0 {
		if err := c.SetAddElements(s, es); err != nil {
			return f.wrap(err)
		}
	}
	if err := c.Flush(); err != nil {
		return f.installLocked()
	}
	return nil
}

func (f *hostFirewall) addLocked(s *nftables.Set, key []byte) error {
	if f.closed {
		return errors.New("the local box is stopping")
	}
	c, err := nftables.New()
	if err != nil {
		return f.wrap(err)
	}
	if err := c.SetAddElements(s, []nftables.SetElement{{Key: key}}); err != nil {
		return f.wrap(err)
	}
	if err := c.Flush(); err != nil {
		return f.installLocked()
	}
	return nil
}

// remove forgets bridge: its network is gone.
func (f *hostFirewall) remove(bridge string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.bridges, bridge)
	c, err := nftables.New()
	if err != nil {
		return f.wrap(err)
	}
	s := &nftables.Set{Table: f.tableRef(), Name: "boxes", KeyType: nftables.TypeIFName}
	if err := c.SetDeleteElements(s, []nftables.SetElement{{Key: ifname(bridge)}}); err != nil {
		return f.wrap(err)
	}
	if err := c.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
		return f.wrap(err)
	}
	return nil
}

// watch makes the table again whenever it goes while the boxes run
// (an `nft flush ruleset`, as Debian's nftables service does at each
// start and reload, or a firewall manager's reload), until close;
// logf says what it did. Between the deletion and the new table the
// host is open to the boxes for as long as one netlink round trip.
func (f *hostFirewall) watch(logf func(string, ...any)) error {
	events, err := f.subscribe()
	if err != nil {
		return err
	}
	go func() {
		for {
			for ev := range events {
				t, ok := ev.Data.(*nftables.Table)
				ours := ev.Type == nftables.MonitorEventTypeDelTable && ok && t.Name == f.table
				if !ours && ev.Type != nftables.MonitorEventTypeOOB {
					continue
				}
				// Our own install deletes and makes the table in one
				// transaction: the table there is nothing to do.
				if err := f.restore(); err != nil {
					logf("%v", err)
				} else if ev.Error != nil {
					logf("%s: watching it: %v", f.table, ev.Error)
				}
			}
			// The monitor ended without close (its socket overflowed
			// on a busy host): watch again, then make up for what it
			// missed.
			if events, err = f.subscribe(); err != nil {
				logf("%s: watching it: %v", f.table, err)
				return
			}
			if events == nil {
				return
			}
			if err := f.restore(); err != nil {
				logf("%v", err)
			}
		}
	}()
	return nil
}

// subscribe starts a monitor of nftables' tables as watching; nil
// events after close.
func (f *hostFirewall) subscribe() (chan *nftables.MonitorEvent, error) {
	c, err := nftables.New()
	if err != nil {
		return nil, f.wrap(err)
	}
	// Any action: v0.3.0's filter lets no deletion through when asked
	// for deletions only.
	m := nftables.NewMonitor(nftables.WithMonitorObject(nftables.MonitorObjectTables))
	events, err := c.AddMonitor(m)
	if err != nil {
		return nil, f.wrap(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		m.Close()
		return nil, nil
	}
	f.watching = m
	return events, nil
}

// restore makes the table again if it is gone and close was not called.
func (f *hostFirewall) restore() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	c, err := nftables.New()
	if err != nil {
		return f.wrap(err)
	}
	if _, err := c.ListTableOfFamily(f.table, nftables.TableFamilyINet); err == nil {
		return nil
	}
	return f.installLocked()
}

// close removes the table: no box of the local box runs.
func (f *hostFirewall) close() error {
	f.mu.Lock()
	f.closed = true
	m := f.watching
	f.mu.Unlock()
	if m != nil {
		m.Close()
	}
	return removeFirewall(f.table)
}

// removeFirewall removes the local box's table, if there is one.
func removeFirewall(table string) error {
	c, err := nftables.New()
	if err != nil {
		return err
	}
	t := &nftables.Table{Family: nftables.TableFamilyINet, Name: table}
	c.AddTable(t)
	c.DelTable(t)
	if err := c.Flush(); err != nil {
		return fmt.Errorf("remove nftables table inet %s: %w", table, err)
	}
	return nil
}

func (f *hostFirewall) wrap(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("nftables table inet %s: %w", f.table, err)
}

// ifname is name as an nftables ifname key: IFNAMSIZ bytes, NUL-padded.
func ifname(name string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return b
}

// l4 matches the transport protocol proto.
func l4(proto byte) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
	}
}

// toOwnAddress matches a packet to an address of the interface it came
// in on (fib daddr . iif type local): a box's gateway, not the host's
// other addresses.
var toOwnAddress = []expr.Any{
	&expr.Fib{Register: 1, ResultADDRTYPE: true, FlagDADDR: true, FlagIIF: true},
	&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(unix.RTN_LOCAL)},
}
