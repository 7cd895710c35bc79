package http

import "github.com/valyala/fasthttp"

// ResourceAdmin is what the resource and message routes (shared/spec/api.md §7.2-7.4, §8) need of the Broker.
type ResourceAdmin interface{}

// resourceRoutes are the resource and message routes (shared/spec/api.md §7.2-7.4, §8) of the route table.
func (s *Server) resourceRoutes() []route {
	return []route{
		{fasthttp.MethodGet, "/api/v1/messages/{partitionId}/{transactionId}", levelReadOnly, s.handleGetMessage},
		{fasthttp.MethodDelete, "/api/v1/resources/queues/{queue}", levelAdmin, s.handleDeleteQueue},
	}
}
