//go:build !linux

package cli_test

import "github.com/rogpeppe/go-internal/testscript"

// nftable is Linux's only: the local box's firewall is nftables.
func nftable(ts *testscript.TestScript, neg bool, args []string) {
	ts.Fatalf("nftable: Linux only")
}

// nftdelete is Linux's only, as nftable.
func nftdelete(ts *testscript.TestScript, neg bool, args []string) {
	ts.Fatalf("nftdelete: Linux only")
}
