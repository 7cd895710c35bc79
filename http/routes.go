package http

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"
)

// level is the access a route requires, as docs/api.md
// "Authentication" lists them (the reference server's levels). Each level admits the roles of the levels above it.
// The zero value is no level at all, which register refuses, so a route
// can never be open by omission.
type level uint8

const (
	levelUnset     level = iota
	levelPublic          // PUB: never checked, even with JWT_ENABLED
	levelReadOnly        // RO: the read-only, read-write or admin role
	levelReadWrite       // RW: the read-write or admin role
	levelAdmin           // ADM: the admin role
)

func (l level) String() string {
	switch l {
	case levelPublic:
		return "public"
	case levelReadOnly:
		return "read-only"
	case levelReadWrite:
		return "read-write"
	case levelAdmin:
		return "admin"
	}
	return "unset"
}

// route is one entry of the route table.
type route struct {
	method, path string
	level        level
	handle       fasthttp.RequestHandler
}

// routes is the route table: every route the broker serves and the level
// it requires. A route added anywhere else stops New (see unleveled).
func (s *Server) routes() []route {
	core := []route{
		{fasthttp.MethodGet, "/health", levelPublic, s.handleHealth},
		{fasthttp.MethodGet, "/health/live", levelPublic, s.handleLive},
		{fasthttp.MethodGet, "/health/ready", levelPublic, s.handleReady},
		{fasthttp.MethodGet, "/metrics", levelPublic, s.handleMetrics},
		{fasthttp.MethodGet, "/metrics/prometheus", levelPublic, s.handlePrometheus},
		{fasthttp.MethodPost, "/api/v1/configure", levelReadWrite, s.handleConfigure},
		{fasthttp.MethodPost, "/api/v1/push", levelReadWrite, s.handlePush},
		{fasthttp.MethodGet, "/api/v1/pop", levelReadWrite, s.handlePopDiscovery},
		{fasthttp.MethodGet, "/api/v1/pop/queue/{queue}", levelReadWrite, s.handlePopQueue},
		{fasthttp.MethodGet, "/api/v1/pop/queue/{queue}/partition/{partition}", levelReadWrite, s.handlePopPartition},
		{fasthttp.MethodPost, "/api/v1/ack", levelReadWrite, s.handleAck},
		{fasthttp.MethodPost, "/api/v1/ack/batch", levelReadWrite, s.handleAckBatch},
		{fasthttp.MethodPost, "/api/v1/lease/{leaseId}/extend", levelReadWrite, s.handleExtend},
		{fasthttp.MethodPost, "/api/v1/transaction", levelReadWrite, s.handleTransaction},
		{fasthttp.MethodGet, "/api/v1/dlq", levelReadOnly, s.handleListDLQ},
		// Requeue and delete change data, as a message delete (RW) does;
		// the reference has neither route and would default them to RW.
		{fasthttp.MethodPost, "/api/v1/dlq/{id}/requeue", levelReadWrite, s.handleRequeueDLQ},
		{fasthttp.MethodDelete, "/api/v1/dlq/{id}", levelReadWrite, s.handleDeleteDLQ},
		{fasthttp.MethodGet, "/api/v1/system/maintenance/pop", levelAdmin, s.handleGetPopMaintenance},
		{fasthttp.MethodPost, "/api/v1/system/maintenance/pop", levelAdmin, s.handleSetPopMaintenance},
	}
	// The admin areas keep their routes beside their handlers; register
	// checks their levels all the same.
	return slices.Concat(core, s.groupRoutes(), s.resourceRoutes(), s.statusRoutes(), s.traceRoutes(), s.maintenanceRoutes(), s.streamRoutes(), s.streamAdminRoutes(), s.dashboardRoutes())
}

// register adds every route of table to r, each behind the check of its
// level. It panics on an entry without a level.
func (s *Server) register(r *router.Router, table []route) {
	for _, rt := range table {
		if rt.level == levelUnset {
			panic(fmt.Sprintf("http: route %s %s has no access level", rt.method, rt.path))
		}
		r.Handle(rt.method, rt.path, s.guard(rt.level, rt.handle))
	}
}

// unleveled lists, as "METHOD path", the routes registered on r that are
// not in the route table: routes that would skip authentication.
func (s *Server) unleveled(r *router.Router) []string {
	known := map[string]bool{}
	for _, rt := range s.routes() {
		known[rt.method+" "+rt.path] = true
	}
	var out []string
	for method, paths := range r.List() {
		for _, p := range paths {
			if !known[method+" "+p] {
				out = append(out, method+" "+p)
			}
		}
	}
	slices.Sort(out)
	return out
}

// mustBeLeveled panics when r carries a route outside the route table, so
// a broker with such a route never starts.
func (s *Server) mustBeLeveled(r *router.Router) {
	if missing := s.unleveled(r); len(missing) > 0 {
		panic("http: routes outside the route table (add them to routes() with a level): " + strings.Join(missing, ", "))
	}
}
