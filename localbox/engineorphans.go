package localbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/moby/moby/client"
)

// EngineOrphans are the state directories, gone, whose local boxes left
// containers, volumes or networks in one container engine.
type EngineOrphans struct {
	// Engine is EngineDocker or EnginePodman; Host its API address.
	Engine, Host string
	// States are the gone state directories (stateGone), sorted.
	States []string
}

// orphanEngines are the engines purge --orphans looks in: docker's and
// podman's usual sockets (docker's DOCKER_HOST), each once. A unix socket
// that is not there is an engine not installed, left out.
func orphanEngines() []EngineOrphans {
	var out []EngineOrphans
	for _, name := range []string{EngineDocker, EnginePodman} {
		h := engineHost(name, "")
		if p, ok := strings.CutPrefix(h, "unix://"); ok {
			if _, err := os.Stat(p); err != nil {
				continue
			}
		}
		if !slices.ContainsFunc(out, func(o EngineOrphans) bool { return o.Host == h }) {
			out = append(out, EngineOrphans{Engine: name, Host: h})
		}
	}
	return out
}

// stateGone reports whether the state directory a label names is gone,
// or no longer a local box's: its path is not there, or is not a
// directory. A path that cannot be looked at counts as there.
func stateGone(dir string) bool {
	if !filepath.IsAbs(dir) {
		return false
	}
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	return err == nil && !fi.IsDir()
}

// findEngineOrphans lists, in each engine of orphanEngines, the state
// directories (stateLabel) of its containers, volumes and networks that
// are gone. An engine whose socket is there but does not answer is an
// error: the purge stops, and the next one does it.
func findEngineOrphans(ctx context.Context) ([]EngineOrphans, error) {
	var out []EngineOrphans
	for _, e := range orphanEngines() {
		cli, err := client.New(client.WithHost(e.Host), client.WithAPIVersionNegotiation())
		if err != nil {
			return nil, fmt.Errorf("engine %s at %s: %w", e.Engine, e.Host, err)
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err = cli.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true})
		cancel()
		if err != nil {
			cli.Close()
			return nil, fmt.Errorf("engine %s does not answer at %s, so its orphans are not known: start it (systemctl start %s) and purge again, or, if it is uninstalled, remove that socket", e.Engine, e.Host, e.Engine)
		}
		states, err := labelledStates(ctx, cli)
		cli.Close()
		if err != nil {
			return nil, fmt.Errorf("list the local boxes' objects in %s: %w", e.Engine, err)
		}
		for _, s := range states {
			if stateGone(s) {
				e.States = append(e.States, s)
			}
		}
		if len(e.States) > 0 {
			slices.Sort(e.States)
			out = append(out, e)
		}
	}
	return out, nil
}

// labelledStates are the values of stateLabel on cli's containers,
// volumes and networks, each once.
func labelledStates(ctx context.Context, cli *client.Client) ([]string, error) {
	f := client.Filters{}.Add("label", stateLabel)
	seen := map[string]bool{}
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, err
	}
	for _, c := range cs.Items {
		seen[c.Labels[stateLabel]] = true
	}
	vs, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: f})
	if err != nil {
		return nil, err
	}
	for _, v := range vs.Items {
		seen[v.Labels[stateLabel]] = true
	}
	ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		return nil, err
	}
	for _, n := range ns.Items {
		seen[n.Labels[stateLabel]] = true
	}
	var out []string
	for s := range seen {
		out = append(out, s)
	}
	return out, nil
}

// purgeEngineOrphans removes what findEngineOrphans found, each state
// directory looked at again first: one made again meanwhile keeps its
// objects.
func purgeEngineOrphans(ctx context.Context, found []EngineOrphans) error {
	for _, e := range found {
		for _, s := range e.States {
			if !stateGone(s) {
				continue
			}
			if err := purgeState(ctx, EngineSettings{Engine: e.Engine, Host: e.Host}, s); err != nil {
				return fmt.Errorf("remove the objects of %s from %s: %w; purge again once it answers", s, e.Engine, err)
			}
		}
	}
	return nil
}
