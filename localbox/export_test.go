package localbox

// AnonConnsOpen is how many anonymous connections the TCP listener being
// served holds (gate.go).
func (s *Server) AnonConnsOpen() int {
	s.mu.Lock()
	g := s.gate
	s.mu.Unlock()
	if g == nil {
		return 0
	}
	return g.count()
}
