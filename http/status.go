package http

// StatusAdmin is what the status and analytics routes (shared/spec/api.md §2, §7.5) need of the Broker.
type StatusAdmin interface{}

// statusRoutes are the status and analytics routes (shared/spec/api.md §2, §7.5) of the route table.
func (s *Server) statusRoutes() []route {
	return []route{}
}
