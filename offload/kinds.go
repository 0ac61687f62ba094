package offload

import (
	"fmt"
	"strings"

	"github.com/cocoonbox/cocoonbox/agentwire"
)

// KindNames lists the names of the kinds that can be used.
func KindNames() []string {
	var n []string
	for _, k := range agentwire.Kinds() {
		if k.Unsupported() == "" {
			n = append(n, k.Name())
		}
	}
	return n
}

// LookupKind returns the kind named name, or an error: one listing the
// kinds, or for a kind not supported yet its reason.
func LookupKind(name string) (agentwire.Kind, error) {
	k := agentwire.KindNamed(name)
	if k == nil {
		return nil, fmt.Errorf("unknown kind %q: want %s", name, strings.Join(KindNames(), ", "))
	}
	if k.Unsupported() != "" {
		return nil, fmt.Errorf("--kind %s is not supported yet: %s; use %s", name, k.Unsupported(), strings.Join(KindNames(), " or "))
	}
	return k, nil
}
