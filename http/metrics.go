package http

import (
	"runtime"
	"syscall"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"
)

// Counters of the HTTP face, exported on /metrics/prometheus.
var (
	pushRequests   = metrics.NewCounter(`queengo_push_requests_total`)
	pushMessages   = metrics.NewCounter(`queengo_push_messages_total`)
	pushDuplicates = metrics.NewCounter(`queengo_push_duplicates_total`)
	pushFailed     = metrics.NewCounter(`queengo_push_failed_total`)
	popRequests    = metrics.NewCounter(`queengo_pop_requests_total`)
	popMessages    = metrics.NewCounter(`queengo_pop_messages_total`)
	popEmpty       = metrics.NewCounter(`queengo_pop_empty_total`)
	popErrors      = metrics.NewCounter(`queengo_pop_errors_total`)
	ackRequests    = metrics.NewCounter(`queengo_ack_requests_total`)
	ackItems       = metrics.NewCounter(`queengo_ack_items_total`)
	ackFailed      = metrics.NewCounter(`queengo_ack_item_failures_total`)
	pushDuration   = metrics.NewHistogram(`queengo_request_duration_seconds{route="push"}`)
	popDuration    = metrics.NewHistogram(`queengo_request_duration_seconds{route="pop"}`)
	ackDuration    = metrics.NewHistogram(`queengo_request_duration_seconds{route="ack"}`)
)

var started = time.Now()

func (s *Server) handlePrometheus(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("text/plain; version=0.0.4; charset=utf-8")
	ctx.Response.Header.Set("Cache-Control", "no-cache")
	metrics.WritePrometheus(ctx, true)
}

// handleMetrics is the JSON summary the SDKs' admin.metrics() returns.
func (s *Server) handleMetrics(ctx *fasthttp.RequestCtx) {
	up := time.Since(started).Seconds()
	reqs := pushRequests.Get() + popRequests.Get() + ackRequests.Get()
	msgs := pushMessages.Get()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	total, idle, acquired := s.broker.PoolStats()
	buf := append(make([]byte, 0, 512), `{"uptime":`...)
	buf = appendFloat(buf, up)
	buf = append(buf, `,"requests":{"total":`...)
	buf = appendUint(buf, reqs)
	buf = append(buf, `,"rate":`...)
	buf = appendFloat(buf, float64(reqs)/up)
	buf = append(buf, `},"messages":{"total":`...)
	buf = appendUint(buf, msgs)
	buf = append(buf, `,"rate":`...)
	buf = appendFloat(buf, float64(msgs)/up)
	buf = append(buf, `},"database":{"poolSize":`...)
	buf = appendInt(buf, int(total))
	buf = append(buf, `,"idleConnections":`...)
	buf = appendInt(buf, int(idle))
	buf = append(buf, `,"activeConnections":`...)
	buf = appendInt(buf, int(acquired))
	buf = append(buf, `,"waitingRequests":0},"memory":{"rss":`...)
	buf = appendUint(buf, uint64(ru.Maxrss)*1024)
	buf = append(buf, `,"heapTotal":`...)
	buf = appendUint(buf, ms.HeapSys)
	buf = append(buf, `,"heapUsed":`...)
	buf = appendUint(buf, ms.HeapAlloc)
	buf = append(buf, `,"external":0,"arrayBuffers":0},"cpu":{"user":`...)
	buf = appendInt(buf, int(ru.Utime.Sec*1e6+ru.Utime.Usec))
	buf = append(buf, `,"system":`...)
	buf = appendInt(buf, int(ru.Stime.Sec*1e6+ru.Stime.Usec))
	buf = append(buf, `},"goroutines":`...)
	buf = appendInt(buf, runtime.NumGoroutine())
	buf = append(buf, '}')
	writeJSON(ctx, fasthttp.StatusOK, buf)
}
