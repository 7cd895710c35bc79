// Package http is the broker's HTTP face: the fasthttp router, request
// parsing and validation, JSON encoding and status codes of the Queen MQ
// protocol (shared/spec/api.md, pop-routes.md). Handlers hold no SQL: they
// call the actor tree (package actors) and, for the few administrative
// routes, a Store interface that package pg satisfies.
package http

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"time"

	"github.com/fasthttp/router"
	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"github.com/queengo/queengo"
)

// Broker is the part of the actor tree the handlers use; *actors.Broker
// satisfies it.
type Broker interface {
	Push(ctx context.Context, items []queengo.PushItem) ([]queengo.PushResult, error)
	Pop(req *queengo.PopRequest, cancel <-chan struct{}) (queengo.PopResult, error)
	QueueChanged(name string, deleted bool)
	SetPopMaintenanceLocal(on bool)
	Ack(ctx context.Context, items []queengo.AckItem) ([]queengo.AckResult, error)
	Transaction(ctx context.Context, ops []queengo.TxOp) ([]queengo.TxResult, error)
	RequeueDeadLetter(ctx context.Context, id uuid.UUID) (queengo.DeadLetter, queengo.Frame, error)
}

// Store is the part of the database layer the administrative handlers use;
// *pg.Store satisfies it.
type Store interface {
	Configure(ctx context.Context, name, namespace, task string, o queengo.QueueOptions) (queengo.Queue, uuid.UUID, error)
	DeleteQueue(ctx context.Context, name string) (bool, error)
	Ping(ctx context.Context) error
	PopMaintenance(ctx context.Context) (bool, error)
	SetPopMaintenance(ctx context.Context, on bool) error
	ExtendLease(ctx context.Context, lease uuid.UUID, seconds int) (expiresAt, reason string, err error)
	ListDeadLetters(ctx context.Context, f queengo.DLQFilter) ([]queengo.DeadLetter, int, error)
	DeleteDeadLetter(ctx context.Context, id uuid.UUID) (bool, error)
	GetMessage(ctx context.Context, partition uuid.UUID, txid string) (queengo.MessageInfo, error)
	SetSubscription(ctx context.Context, group string, ts time.Time) (int, error)
	PoolStats() (total, idle, acquired int32)
}

// Config configures the HTTP server.
type Config struct {
	// PopTimeout is the long-poll deadline of a pop that sends no timeout.
	PopTimeout time.Duration
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
}

// Server serves the API.
type Server struct {
	cfg    Config
	broker Broker
	store  Store
	log    *slog.Logger
	srv    *fasthttp.Server
	watch  clientWatch
}

// New builds the server and its routes.
func New(cfg Config, broker Broker, store Store) *Server {
	if cfg.MaxBodySize <= 0 {
		cfg.MaxBodySize = 16 << 20
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Server{cfg: cfg, broker: broker, store: store, log: log,
		watch: clientWatch{conns: map[uint64]*watched{}, stop: make(chan struct{})}}
	r := router.New()
	r.GET("/health", s.handleHealth)
	r.GET("/metrics", s.handleMetrics)
	r.GET("/metrics/prometheus", s.handlePrometheus)
	r.POST("/api/v1/configure", s.handleConfigure)
	r.POST("/api/v1/push", s.handlePush)
	r.GET("/api/v1/pop", s.handlePopDiscovery)
	r.GET("/api/v1/pop/queue/{queue}", s.handlePopQueue)
	r.GET("/api/v1/pop/queue/{queue}/partition/{partition}", s.handlePopPartition)
	r.POST("/api/v1/ack", s.handleAck)
	r.POST("/api/v1/ack/batch", s.handleAckBatch)
	r.POST("/api/v1/lease/{leaseId}/extend", s.handleExtend)
	r.POST("/api/v1/transaction", s.handleTransaction)
	r.GET("/api/v1/dlq", s.handleListDLQ)
	r.POST("/api/v1/dlq/{id}/requeue", s.handleRequeueDLQ)
	r.DELETE("/api/v1/dlq/{id}", s.handleDeleteDLQ)
	r.GET("/api/v1/messages/{partitionId}/{transactionId}", s.handleGetMessage)
	r.POST("/api/v1/consumer-groups/{group}/subscription", s.handleSubscription)
	r.DELETE("/api/v1/resources/queues/{queue}", s.handleDeleteQueue)
	r.GET("/api/v1/system/maintenance/pop", s.handleGetPopMaintenance)
	r.POST("/api/v1/system/maintenance/pop", s.handleSetPopMaintenance)
	r.GlobalOPTIONS = func(ctx *fasthttp.RequestCtx) {
		setCORS(ctx)
		ctx.Response.Header.Set("Access-Control-Max-Age", "86400")
		ctx.SetStatusCode(fasthttp.StatusNoContent)
	}
	// No redirects: a POST client would follow a 308 or fail on it, and a
	// path that is not a route is a client's mistake (404).
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.NotFound = func(ctx *fasthttp.RequestCtx) { writeError(ctx, errRouteNotFound) }
	r.MethodNotAllowed = func(ctx *fasthttp.RequestCtx) { writeError(ctx, errMethodNotAllowed) }
	r.PanicHandler = func(ctx *fasthttp.RequestCtx, v any) {
		log.Error("handler panic", "path", string(ctx.Path()), "panic", v)
		writeError(ctx, errInternal)
	}
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
		ErrorHandler:          func(ctx *fasthttp.RequestCtx, err error) { writeError(ctx, serverError(err, cfg.MaxBodySize)) },
	}
	return s
}

// Serve accepts connections on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error { return s.srv.Serve(retryAccept(ln, s.log)) }

// Shutdown stops accepting connections and waits for in-flight requests.
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
