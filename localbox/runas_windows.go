package localbox

import (
	"errors"
	"os"
	"syscall"
)

// boxUser is unused on Windows: the local box serves no Windows boxes.
type boxUser struct {
	name     string
	uid, gid uint32
}

func lookupBoxUser(name string) (*boxUser, error) {
	return nil, errors.New("a box user is not supported on Windows")
}

func (s *Server) sysProcAttr(b *box) *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
func (s *Server) userName(b *box) string                  { return "" }
func (s *Server) chownBox(b *box) error                   { return nil }
func (s *Server) removeRun(b *box)                        {}
func (s *Server) checkReach() error                       { return nil }

// CheckStateOwner does nothing on Windows, which has no root.
func CheckStateOwner(dir string) error { return nil }

// CheckBinOwner does nothing on Windows, which has no root.
func CheckBinOwner(exe string) error { return nil }

// DefaultUser is the box user a local box served by root runs box
// commands as (docs/cocoonbox.md "Local box").
const DefaultUser = "user"

// MkdirState makes the state directory dir, 0700, with its parents.
func MkdirState(dir string) error { return os.MkdirAll(dir, 0o700) }

func mkdirPrivate(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }

func (s *Server) asUser(b *box, stdin []byte, script string, args ...string) error {
	return errors.New("a box user is not supported on Windows")
}

// StateRecipe is the next step for a state directory out of a box user's
// reach; unused on Windows.
const StateRecipe = ""

func (s *Server) boxUIDs() []uint32 { return nil }
