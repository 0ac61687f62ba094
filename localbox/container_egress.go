package localbox

import (
	"context"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// createNetwork makes box b's network ctr: a bridge of its own, no
// traffic between the containers on it, and internal (no route out but
// the host, where the egress proxy listens) when the owner set egress
// rules.
func (e *containerEngine) createNetwork(ctx context.Context, b *box, ctr string, labels map[string]string) error {
	_, err := e.cli.NetworkCreate(ctx, ctr, client.NetworkCreateOptions{Driver: "bridge", Labels: labels,
		Internal: e.rules.Ruled(),
		Options:  map[string]string{"com.docker.network.bridge.enable_icc": "false"}})
	if err != nil {
		return fmt.Errorf("network of box %s: %w", b.Name, err)
	}
	return nil
}

// networkEgress makes box b's network, before its container ctr starts,
// internal or not as the owner's egress rules say: a network of the
// other kind (rules set or cleared since) is made again and the
// container put on the new one.
func (e *containerEngine) networkEgress(ctx context.Context, b *box, ctr string) error {
	n, err := e.cli.NetworkInspect(ctx, ctr, client.NetworkInspectOptions{})
	if err != nil || n.Network.Internal == e.rules.Ruled() {
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
			}
			return
		}
	}
	e.s.logf("box %s: egress proxy: network %s has no IPv4 gateway", b.Name, ctr)
}
