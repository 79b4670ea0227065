package proxy

// SubscriptionHolders is how many sessions hold uri on server, for tests
// that wait for a subscriber to arrive.
func (s *Server) SubscriptionHolders(server, uri string) int {
	return s.subs.Holders(server, uri)
}
