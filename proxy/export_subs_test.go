package proxy

// SubscriptionHolders is how many sessions hold uri on server, for tests
// that wait for a subscriber to arrive.
func (s *Server) SubscriptionHolders(server, uri string) int {
	t := s.subs.table(server)
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.uris[uri]; e != nil {
		return len(e.holders)
	}
	return 0
}
