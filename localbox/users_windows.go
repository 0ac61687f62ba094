package localbox

import (
	"errors"
	"time"
)

// DefaultClaimsDir is unused on Windows, where the local box refuses.
const DefaultClaimsDir = ""

var errWindows = errors.New("the local box does not run on Windows")

func claimUser(claims, stateDir, account, unix string, mapped bool) (*boxUser, bool, error) {
	return nil, false, errWindows
}

// OwnerUser chooses no user on Windows, which has no root.
func OwnerUser(claims, stateDir, bin, prefix string) (name, note string, err error) {
	return "", "", nil
}

// ClaimOwnerUser does nothing on Windows.
func ClaimOwnerUser(claims, stateDir, name string) error { return nil }

func releaseClaim(claims, stateDir, unix string) error { return nil }
func deleteUnixUser(name string) error                 { return errWindows }
func retireIDs(claims string, ids ...uint32) error     { return errWindows }
func killUser(uid uint32, timeout time.Duration) error { return nil }
func accountIDs(a Account) (*boxUser, bool)            { return &boxUser{}, false }
func endAccountProcs(string, *boxUser, bool) error     { return errWindows }
func removeBoxDir(dir string, u *boxUser) error        { return errWindows }
func closedAbove(dir string, u *boxUser) string        { return "" }
func describe(d string) string                         { return "" }
func (s *Server) userOf(b *box) *boxUser               { return nil }
