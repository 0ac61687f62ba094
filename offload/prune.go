package offload

import (
	"context"
	"errors"
	"strings"
)

// Prune deletes the refs under refs/cocoonbox/ that no offload in flight
// needs: every one but those of offload keep (the id in this repository's
// record; "" when none is in flight, and then the box copy's branches,
// refs/cocoonbox/box/*, go too). It returns the names it deleted (or, with
// dryRun, would delete), sorted; the objects they named stay until git's
// own gc. Errors are git's (*GitError).
func (r *Repo) Prune(ctx context.Context, keep string, dryRun bool) ([]string, error) {
	out, err := r.git.run(ctx, nil, "for-each-ref", "--format=%(refname)", "refs/cocoonbox/")
	if err != nil {
		return nil, err
	}
	var gone []string
	for _, ref := range strings.Fields(out) {
		if keep != "" && (strings.HasSuffix(ref, "/"+keep) || strings.HasPrefix(ref, RefBox)) {
			continue
		}
		gone = append(gone, ref)
	}
	if dryRun || len(gone) == 0 {
		return gone, nil
	}
	var stdin strings.Builder
	for _, ref := range gone {
		stdin.WriteString("delete " + ref + "\n")
	}
	if _, err := r.git.run(ctx, strings.NewReader(stdin.String()), "update-ref", "--stdin"); err != nil {
		return nil, err
	}
	return gone, nil
}

// InFlight is the id of this repository's offload in flight in store, or
// "" when it has none.
func (r *Repo) InFlight(store Store) (string, error) {
	rec, err := store.LoadRecord(r.Key)
	if errors.Is(err, ErrNoRecord) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return rec.ID, nil
}
