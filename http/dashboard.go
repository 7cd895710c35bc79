package http

import (
	"sync"

	"github.com/valyala/fasthttp"

	"github.com/queengo/queengo/http/dashboard"
)

// dashboardRoutes serve the web dashboard (package dashboard) at "/" and
// its files under /assets/. They are public: the page must load before it
// can ask for a token, holds no data, and every API call it makes carries
// the user's token and is checked at its own route's level.
func (s *Server) dashboardRoutes() []route {
	d, err := dashboardHandler()
	if err != nil {
		// The assets are embedded in the binary: failing here is a build
		// defect, as a route without a level is.
		panic(err)
	}
	d = d.WithNotFound(func(ctx *fasthttp.RequestCtx) { s.writeError(ctx, errRouteNotFound) })
	return []route{
		{fasthttp.MethodGet, "/", levelPublic, d.Index},
		{fasthttp.MethodGet, "/assets/{filepath:*}", levelPublic, d.Asset},
	}
}

// dashboardHandler loads (and compresses) the assets once per process,
// however many servers it has; each answers its own not-found paths.
var dashboardHandler = sync.OnceValues(func() (*dashboard.Handler, error) {
	return dashboard.New(nil)
})
