package cli

import (
	"errors"
	"math"
	"testing"

	"github.com/cocoonbox/cocoonbox/localbox"
)

// --box-memory, --box-cpus and --box-pids refuse a value that is no
// limit (NaN and infinities among them: a float flag takes them) in one
// line, a usage error, and leave the limits as they were.
func TestLimitFlagsRefuse(t *testing.T) {
	for _, f := range []limitFlags{
		{CPUs: math.NaN()}, {CPUs: math.Inf(1)}, {CPUs: math.Inf(-1)}, {CPUs: -1}, {CPUs: 0.001},
		{Pids: -1}, {Memory: "0"}, {Memory: "-1g"}, {Memory: "1k"}, {Memory: "lots"}, {Memory: "99999999999999999999g"},
	} {
		l := localbox.Limits{MemoryBytes: 1 << 30, NanoCPUs: 1e9, Pids: 100}
		err := f.apply(&l)
		var u *UsageError
		if !errors.As(err, &u) {
			t.Errorf("%+v: %v, want a usage error", f, err)
		}
		if l != (localbox.Limits{MemoryBytes: 1 << 30, NanoCPUs: 1e9, Pids: 100}) {
			t.Errorf("%+v changed the limits to %+v", f, l)
		}
	}
}
