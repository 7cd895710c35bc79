// Package http is the broker's HTTP face: the fasthttp router, request
// parsing and validation, JSON encoding, status codes and the one table of
// error answers (errors.go) of the Queen MQ protocol (docs/api.md,
// docs/pop-routes.md). Handlers hold no SQL and see no store: every operation goes
// through the Broker (package actors), and every failure it reports is a
// typed error that only this package turns into text.
package http

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/fasthttp/router"
	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"github.com/queengo/queengo"
)

// Broker is the handlers' only door into the domain; *actors.Broker
// satisfies it. Every method is bounded by its context (Pop: see there) and
// fails with the errors of package queengo, wrapped.
type Broker interface {
	GroupAdmin
	ResourceAdmin
	StatusAdmin
	TraceAdmin
	MaintenanceAdmin
	StreamAdmin
	Push(ctx context.Context, items []queengo.PushItem) ([]queengo.PushResult, error)
	Pop(ctx context.Context, req *queengo.PopRequest) (queengo.PopResult, error)
	// Abandon ends the lease of a pop's answer that its client will not
	// read (it hung up).
	Abandon(res queengo.PopResult)
	Ack(ctx context.Context, items []queengo.AckItem) ([]queengo.AckResult, error)
	ExtendLease(ctx context.Context, lease uuid.UUID, seconds int) (expiresAt string, failure queengo.AckFailure, err error)
	Transaction(ctx context.Context, ops []queengo.TxOp) ([]queengo.TxResult, error)
	RegisterStream(ctx context.Context, r queengo.StreamRegistration) (queengo.StreamRegistered, error)
	StreamState(ctx context.Context, f queengo.StateFilter) ([]queengo.StateRow, error)
	Cycle(ctx context.Context, cy *queengo.Cycle) (queengo.CycleResult, error)
	Configure(ctx context.Context, name, namespace, task string, o queengo.QueueOptions) (queengo.Queue, uuid.UUID, error)
	DeleteQueue(ctx context.Context, name string) (existed bool, err error)
	PopMaintenance(ctx context.Context) (bool, error)
	SetPopMaintenance(ctx context.Context, on bool) error
	ListDeadLetters(ctx context.Context, f queengo.DLQFilter) ([]queengo.DeadLetter, int, error)
	RequeueDeadLetter(ctx context.Context, id uuid.UUID) (queengo.DeadLetter, queengo.Frame, error)
	DeleteDeadLetter(ctx context.Context, id uuid.UUID) error
	GetMessage(ctx context.Context, partition uuid.UUID, txid string) (queengo.MessageInfo, error)
	SetSubscription(ctx context.Context, group string, ts time.Time) (int, error)
	Health(ctx context.Context) error
	PoolStats() (total, idle, acquired int32)
}

// Config configures the HTTP server.
type Config struct {
	// PopTimeout is the long-poll deadline of a pop that sends no timeout.
	PopTimeout time.Duration
	// PopBatch is the batch of a pop that sends none (0: 1), and
	// PopSubscriptionMode the subscriptionMode of one that sends none
	// ("" or "all": all, "new" or "new-only": new).
	PopBatch            int
	PopSubscriptionMode string
	// MaxBodySize caps a request body in bytes.
	MaxBodySize int
	// ReadTimeout bounds reading one request, headers and body, from the
	// moment the connection opens or, on a kept-alive connection, from its
	// first byte; a connection that never speaks is closed after it too.
	// A parked long poll has finished reading and is not affected.
	ReadTimeout time.Duration
	// Version is reported by /health.
	Version string
	Logger  *slog.Logger
	// Auth checks every route's access level (JWT_ENABLED); nil: off,
	// every route is open.
	Auth *Auth
	// Metrics is the broker process's set, served on /metrics/prometheus
	// with the process's own figures; the server registers its counters
	// in it. nil: a set of its own.
	Metrics *metrics.Set
	// Started is when the broker process started (its uptime); zero: when
	// New ran.
	Started time.Time
}

// Server serves the API.
type Server struct {
	cfg     Config
	broker  Broker
	log     *slog.Logger
	srv     *fasthttp.Server
	watch   clientWatch
	metrics *metrics.Set
	m       serverMetrics
	started time.Time
	// failures spaces the log lines of failed requests (logFailure).
	failures failureLog
	// draining: Drain was called; /health/ready answers 503 and pushes
	// are refused while the requests in flight finish.
	draining atomic.Bool
}

// New builds the server and its routes.
func New(cfg Config, broker Broker) *Server {
	if cfg.MaxBodySize <= 0 {
		cfg.MaxBodySize = 16 << 20
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.NewSet()
	}
	if cfg.Started.IsZero() {
		cfg.Started = time.Now()
	}
	if cfg.Auth != nil {
		broker = stamping{broker}
		cfg.Auth.verified = cfg.Metrics.NewCounter(authVerifiedName)
	}
	s := &Server{cfg: cfg, broker: broker, log: log, metrics: cfg.Metrics, m: newServerMetrics(cfg.Metrics),
		started: cfg.Started, watch: clientWatch{conns: map[uint64]*watched{}, stop: make(chan struct{})}}
	r := router.New()
	s.register(r, s.routes())
	preflight := func(ctx *fasthttp.RequestCtx) {
		setCORS(ctx)
		ctx.Response.Header.Set("Access-Control-Max-Age", "86400")
		ctx.SetStatusCode(fasthttp.StatusNoContent)
	}
	r.GlobalOPTIONS = preflight
	// No redirects: a POST client would follow a 308 or fail on it, and a
	// path that is not a route is a client's mistake (404), but for a CORS
	// preflight, which answers 204 on any path (the router calls
	// GlobalOPTIONS only for the paths it has).
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.NotFound = func(ctx *fasthttp.RequestCtx) {
		if ctx.IsOptions() {
			preflight(ctx)
			return
		}
		s.writeError(ctx, errRouteNotFound)
	}
	r.MethodNotAllowed = func(ctx *fasthttp.RequestCtx) { s.writeError(ctx, errMethodNotAllowed) }
	r.PanicHandler = func(ctx *fasthttp.RequestCtx, v any) {
		log.Error("handler panic", "path", string(ctx.Path()), "panic", v)
		s.writeError(ctx, errInternal)
	}
	s.mustBeLeveled(r)
	s.srv = &fasthttp.Server{
		Handler:               r.Handler,
		Name:                  "queengo",
		MaxRequestBodySize:    cfg.MaxBodySize,
		NoDefaultContentType:  true,
		NoDefaultServerHeader: true,
		ReadTimeout:           cfg.ReadTimeout,
		IdleTimeout:           2 * time.Minute,
		CloseOnShutdown:       true,
		Logger:                fasthttpLogger{log},
		ErrorHandler:          func(ctx *fasthttp.RequestCtx, err error) { s.writeError(ctx, serverError(err, cfg.MaxBodySize)) },
	}
	return s
}

// Serve accepts connections on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error { return s.srv.Serve(retryAccept(ln, s.log)) }

// Shutdown stops accepting connections and waits for in-flight requests.
// Drain starts a graceful shutdown: /health/ready answers 503 draining (an
// orchestrator stops sending traffic) and pushes answer 503 shutting down,
// while the requests in flight go on. Shutdown follows.
func (s *Server) Drain() { s.draining.Store(true) }

func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.ShutdownWithContext(ctx)
	close(s.watch.stop)
	return err
}

// serverError maps an error met while reading a request, before any route
// ran, onto the table, so even these answers are JSON.
func serverError(err error, maxBody int) apiError {
	var small *fasthttp.ErrSmallBuffer
	var netErr net.Error
	switch {
	case errors.As(err, &small):
		return errHeaderTooLarge
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		return errBodyTooLarge(maxBody)
	case errors.As(err, &netErr) && netErr.Timeout():
		return errRequestTimeout
	}
	return errMalformed
}

type fasthttpLogger struct{ log *slog.Logger }

func (l fasthttpLogger) Printf(format string, args ...any) {
	l.log.Debug("fasthttp", "msg", format, "args", args)
}
