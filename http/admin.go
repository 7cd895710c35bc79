package http

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	"github.com/valyala/fasthttp"
)

// healthTimeout bounds the health check's SELECT 1.
const healthTimeout = 2 * time.Second

func (s *Server) handleHealth(ctx *fasthttp.RequestCtx) {
	// Not derived from ctx: a timer that fires as the handler returns
	// would read the RequestCtx's values while fasthttp recycles it.
	c, cancel := context.WithTimeout(context.Background(), healthTimeout)
	err := s.broker.Health(c)
	cancel()
	status, db, code := "healthy", "connected", fasthttp.StatusOK
	if err != nil {
		status, db, code = "unhealthy", "disconnected", fasthttp.StatusServiceUnavailable
	}
	buf := append(make([]byte, 0, 256), `{"status":"`...)
	buf = append(buf, status...)
	buf = append(buf, `","database":"`...)
	buf = append(buf, db...)
	buf = append(buf, `","server":"queengo","worker_id":0,"version":`...)
	buf = appendString(buf, s.cfg.Version)
	buf = append(buf, `,"shared_state":{"enabled":false},"queen":{"worker_id":0,"status":"active"}}`...)
	writeJSON(ctx, code, buf)
}

// handleLive is the liveness probe: the process serves HTTP. It reads
// nothing else, so a database outage never gets the broker restarted.
func (s *Server) handleLive(ctx *fasthttp.RequestCtx) {
	writeJSON(ctx, fasthttp.StatusOK, []byte(`{"status":"live"}`))
}

// handleReady is the readiness probe: 200 when the broker can take traffic,
// that is the database answers SELECT 1 within healthTimeout, or it does not
// but the push buffer takes the pushes; 503 when neither, and while the
// broker drains (Drain).
func (s *Server) handleReady(ctx *fasthttp.RequestCtx) {
	if s.draining.Load() {
		ctx.Response.Header.Set("Retry-After", retryAfter)
		writeJSON(ctx, fasthttp.StatusServiceUnavailable, []byte(`{"status":"draining","ready":false}`))
		return
	}
	c, cancel := context.WithTimeout(context.Background(), healthTimeout)
	err := s.broker.Health(c)
	cancel()
	switch {
	case err == nil:
		writeJSON(ctx, fasthttp.StatusOK, []byte(`{"status":"ready","ready":true,"database":"connected"}`))
	case s.broker.BufferStats().Enabled:
		writeJSON(ctx, fasthttp.StatusOK, []byte(`{"status":"ready","ready":true,"database":"disconnected","buffer":"taking pushes"}`))
	default:
		ctx.Response.Header.Set("Retry-After", retryAfter)
		writeJSON(ctx, fasthttp.StatusServiceUnavailable, []byte(`{"status":"not ready","ready":false,"database":"disconnected"}`))
	}
}

func (s *Server) handleDeleteQueue(ctx *fasthttp.RequestCtx) {
	name, e := pathName(ctx, "queue")
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	existed, err := s.broker.DeleteQueue(ctx, name)
	if err != nil {
		s.writeFailure(ctx, failure(err), err)
		return
	}
	buf := append(make([]byte, 0, 96), `{"deleted":true,"queue":`...)
	buf = appendString(buf, name)
	buf = append(buf, `,"existed":`...)
	buf = appendBool(buf, existed)
	buf = append(buf, '}')
	writeJSON(ctx, fasthttp.StatusOK, buf)
}

func (s *Server) writePopMaintenance(ctx *fasthttp.RequestCtx, on bool) {
	buf := append(make([]byte, 0, 96), `{"popMaintenanceMode":`...)
	buf = appendBool(buf, on)
	msg := "Pop maintenance mode is OFF: pops are served"
	if on {
		msg = "Pop maintenance mode is ON: every pop answers 204"
	}
	buf = append(buf, `,"message":`...)
	buf = appendString(buf, msg)
	buf = append(buf, '}')
	writeJSON(ctx, fasthttp.StatusOK, buf)
}

// handleGetPopMaintenance reports the switch as stored; it changes nothing.
func (s *Server) handleGetPopMaintenance(ctx *fasthttp.RequestCtx) {
	on, err := s.broker.PopMaintenance(ctx)
	if err != nil {
		s.writeFailure(ctx, failure(err), err)
		return
	}
	s.writePopMaintenance(ctx, on)
}

func (s *Server) handleSetPopMaintenance(ctx *fasthttp.RequestCtx) {
	on, ok := s.switchBody(ctx)
	if !ok {
		return
	}
	if err := s.broker.SetPopMaintenance(ctx, on); err != nil {
		s.writeFailure(ctx, failure(err), err)
		return
	}
	s.writePopMaintenance(ctx, on)
}

// switchBody reads the body of the maintenance switches, {"enabled": bool};
// anything else is answered 400 and ok is false.
func (s *Server) switchBody(ctx *fasthttp.RequestCtx) (on, ok bool) {
	body := bytes.TrimSpace(ctx.PostBody())
	if len(body) == 0 {
		s.writeError(ctx, errEmptyBody)
		return false, false
	}
	var req struct {
		Enabled *bool `json:"enabled"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.Enabled == nil {
		s.writeError(ctx, errEnabledRequired)
		return false, false
	}
	return *req.Enabled, true
}
