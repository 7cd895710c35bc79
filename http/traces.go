package http

// TraceAdmin is what the trace routes (shared/spec/api.md §4.7) need of the Broker.
type TraceAdmin interface{}

// traceRoutes are the trace routes (shared/spec/api.md §4.7) of the route table.
func (s *Server) traceRoutes() []route {
	return []route{}
}
