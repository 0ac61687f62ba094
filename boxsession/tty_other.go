//go:build !(linux || darwin)

package boxsession

import "errors"

func (h *Holder) startTTY(*request) (*session, error) {
	return nil, errors.New("terminals are not supported on this system")
}

func (s *session) resize(rows, cols uint32) {}
