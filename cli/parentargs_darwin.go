package cli

import (
	"bytes"
	"encoding/binary"
	"os"

	"golang.org/x/sys/unix"
)

// parentArgs is the command line of this process's parent, from the
// kern.procargs2 sysctl (argc, the executable's path, NUL padding, then
// argv); nil when it cannot be read.
func parentArgs() []string {
	b, err := unix.SysctlRaw("kern.procargs2", os.Getppid())
	if err != nil || len(b) < 4 {
		return nil
	}
	argc := int(binary.LittleEndian.Uint32(b))
	b = b[4:]
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return nil
	}
	b = bytes.TrimLeft(b[i:], "\x00")
	var args []string
	for len(args) < argc && len(b) > 0 {
		i := bytes.IndexByte(b, 0)
		if i < 0 {
			i = len(b)
		}
		args = append(args, string(b[:i]))
		b = b[min(i+1, len(b)):]
	}
	if len(args) < argc {
		return nil
	}
	return args
}
