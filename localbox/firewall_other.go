//go:build !linux

package localbox

// hostFirewall is nothing off Linux: a container engine there runs its
// containers in a virtual machine of its own, whose bridges this host
// does not see (docs/self-hosting.md "Egress").
type hostFirewall struct{}

const firewallPrefix = "cbx"

func newHostFirewall(table string, dns bool) *hostFirewall { return &hostFirewall{} }

func (*hostFirewall) install([]string) error           { return nil }
func (*hostFirewall) add(string) error                 { return nil }
func (*hostFirewall) setPorts([]uint16) error          { return nil }
func (*hostFirewall) remove(string) error              { return nil }
func (*hostFirewall) watch(func(string, ...any)) error { return nil }
func (*hostFirewall) close() error                     { return nil }
func removeFirewall(string) error                      { return nil }
