package localbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// bridgeLabel is the label of a box's network that names its bridge
// (the host's interface): networks made before the firewall have none.
const bridgeLabel = "org.cocoonbox.bridge"

// bridge is the name of box b's bridge on the host: the firewall's
// prefix and 12 hex digits of the local box and the box (15 bytes, the
// most an interface name holds).
func (e *containerEngine) bridge(b *box) string {
	h := sha256.Sum256([]byte(e.prefix + "/" + b.ID))
	return firewallPrefix + hex.EncodeToString(h[:6])
}

// createNetwork makes box b's network ctr: a bridge of its own, named
// for the firewall, which fences it before the container starts; no
// traffic between the containers on it; internal (no route out but the
// host, where the egress proxy listens) when the owner set egress
// rules.
func (e *containerEngine) createNetwork(ctx context.Context, b *box, ctr string, labels map[string]string) error {
	br := e.bridge(b)
	labels = maps.Clone(labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[bridgeLabel] = br
	if err := e.fw.add(br); err != nil {
		return fmt.Errorf("network of box %s: fence it off this machine: %w", b.Name, err)
	}
	_, err := e.cli.NetworkCreate(ctx, ctr, client.NetworkCreateOptions{Driver: "bridge", Labels: labels,
		Internal: e.rules.Ruled(),
		Options: map[string]string{"com.docker.network.bridge.enable_icc": "false",
			"com.docker.network.bridge.name": br}})
	if err != nil {
		return fmt.Errorf("network of box %s: %w", b.Name, err)
	}
	return nil
}

// networkEgress makes box b's network, before its container ctr starts,
// as createNetwork would now: internal or not as the owner's egress
// rules say, and its bridge named for the firewall. A network of
// another kind (rules set or cleared since, or made before the
// firewall) is made again and the container put on the new one.
func (e *containerEngine) networkEgress(ctx context.Context, b *box, ctr string) error {
	n, err := e.cli.NetworkInspect(ctx, ctr, client.NetworkInspectOptions{})
	if err != nil || n.Network.Internal == e.rules.Ruled() && n.Network.Labels[bridgeLabel] == e.bridge(b) {
		return nil // none: make makes it with the container
	}
	if _, err := e.cli.NetworkDisconnect(ctx, ctr, client.NetworkDisconnectOptions{Container: ctr, Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("network of box %s: %w", b.Name, err)
	}
	if _, err := e.cli.NetworkRemove(ctx, ctr, client.NetworkRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("network of box %s: %w", b.Name, err)
	}
	if err := e.createNetwork(ctx, b, ctr, n.Network.Labels); err != nil {
		return err
	}
	if _, err := e.cli.NetworkConnect(ctx, ctr, client.NetworkConnectOptions{Container: ctr}); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("network of box %s: %w", b.Name, err)
	}
	return nil
}

// fenceHost installs the firewall afresh, its boxes the bridges of
// every network the local box has in the engine (a start after a kill
// -9 replaces the dead server's table), before any box starts.
func (e *containerEngine) fenceHost(ctx context.Context) error {
	ns, err := e.cli.NetworkList(ctx, client.NetworkListOptions{Filters: client.Filters{}.Add("label", stateLabel+"="+e.s.Dir)})
	if err != nil {
		return fmt.Errorf("list the boxes' networks in %s: %w", e.engine, err)
	}
	var bridges []string
	for _, n := range ns.Items {
		if br := n.Labels[bridgeLabel]; br != "" {
			bridges = append(bridges, br)
		} else if len(n.ID) >= 12 {
			// Made before the firewall: docker's own name, until the
			// box's next start makes the network again.
			bridges = append(bridges, "br-"+n.ID[:12])
		}
	}
	if err := e.fw.install(bridges); err != nil {
		return fmt.Errorf("fence the boxes off this machine's own services: %w: run the local box as root, on a Linux kernel with nf_tables, or use --engine process", err)
	}
	return nil
}

// fenceProxyPorts opens to the boxes, at their own gateways, the ports
// the egress proxy listens on now (box b's listener came or went), and
// no other: not the local box's port where another process holds it
// and the proxy took another.
func (e *containerEngine) fenceProxyPorts(b *box) {
	if err := e.fw.setPorts(e.egress.ports()); err != nil {
		e.s.logf("box %s: egress proxy: %v", b.Name, err)
	}
}

// listenEgress gives box b, whose container ctr runs, its egress proxy
// listener on its network's gateway; a box without one (the network
// has no IPv4 gateway, or the address is taken) has no proxy settings,
// and the log says why.
func (e *containerEngine) listenEgress(ctx context.Context, b *box, ctr string) {
	n, err := e.cli.NetworkInspect(ctx, ctr, client.NetworkInspectOptions{})
	if err != nil {
		e.s.logf("box %s: egress proxy: %v", b.Name, err)
		return
	}
	for _, c := range n.Network.IPAM.Config {
		if c.Gateway.Is4() && c.Subnet.Contains(c.Gateway) {
			if _, err := e.egress.listen(b.ID, c.Gateway, c.Subnet); err != nil {
				e.s.logf("box %s: egress proxy: %v", b.Name, err)
				return
			}
			e.fenceProxyPorts(b)
			return
		}
	}
	e.s.logf("box %s: egress proxy: network %s has no IPv4 gateway", b.Name, ctr)
}
