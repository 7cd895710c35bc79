package http

import (
	"context"
	"testing"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/queengo/queengo"
)

// probeBroker is a Broker whose database answers or not, with or without a
// push buffer.
type probeBroker struct {
	Broker
	down, buffer bool
}

func (b probeBroker) Health(context.Context) error {
	if b.down {
		return queengo.ErrUnavailable
	}
	return nil
}

func (b probeBroker) BufferStats() queengo.BufferStats { return queengo.BufferStats{Enabled: b.buffer} }

// TestReady_DatabaseOrBufferAndNotDraining (issue 43, probes): ready when
// the database answers or the push buffer takes pushes, never while the
// broker drains; live whatever the database does; a push while draining
// answers 503 shutting down.
func TestReady_DatabaseOrBufferAndNotDraining(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name         string
		down, buffer bool
		drain        bool
		want         int
	}{
		{"database up", false, false, false, 200},
		{"database down, no buffer", true, false, false, 503},
		{"database down, buffer on", true, true, false, 200},
		{"draining", false, true, true, 503},
	} {
		s := &Server{broker: probeBroker{down: c.down, buffer: c.buffer}, metrics: metrics.NewSet()}
		if c.drain {
			s.Drain()
		}
		var ctx fasthttp.RequestCtx
		s.handleReady(&ctx)
		if got := ctx.Response.StatusCode(); got != c.want {
			t.Errorf("%s: ready %d %s, want %d", c.name, got, ctx.Response.Body(), c.want)
		}
		var live fasthttp.RequestCtx
		s.handleLive(&live)
		if live.Response.StatusCode() != 200 {
			t.Errorf("%s: live %d", c.name, live.Response.StatusCode())
		}
	}
	s := &Server{broker: probeBroker{}, metrics: metrics.NewSet(), m: newServerMetrics(metrics.NewSet())}
	s.Drain()
	var ctx fasthttp.RequestCtx
	ctx.Request.SetBodyString(`{"items":[{"queue":"q","payload":1}]}`)
	s.handlePush(&ctx)
	if ctx.Response.StatusCode() != 503 || ctx.Response.Header.Peek("Retry-After") == nil {
		t.Fatalf("push while draining: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
}
