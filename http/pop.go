package http

import (
	"context"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queengo/queengo"
)

// parsePop reads the query parameters shared by the three pop routes. Every
// number must be an integer within its cap; leaseSeconds 0 or less means
// absent and partitions 0 or less no cap (docs/pop-routes.md).
func (s *Server) parsePop(args *fasthttp.Args, r *queengo.PopRequest) *apiError {
	var e *apiError
	if r.Batch, e = intParam(args, "batch", max(s.cfg.PopBatch, 1), 1, maxBatch); e != nil {
		return e
	}
	if r.Partitions, e = intParam(args, "partitions", 1, noLowerBound, maxPartitionsCap); e != nil {
		return e
	}
	r.Partitions = max(r.Partitions, 0)
	r.Wait = boolArg(args, "wait")
	ms, e := intParam(args, "timeout", int(s.cfg.PopTimeout/time.Millisecond), 0, maxTimeoutMs)
	if e != nil {
		return e
	}
	r.Timeout = time.Duration(ms) * time.Millisecond
	if r.LeaseSeconds, e = intParam(args, "leaseSeconds", 0, noLowerBound, maxLeaseSeconds); e != nil {
		return e
	}
	r.LeaseSeconds = max(r.LeaseSeconds, 0)
	r.AutoAck = boolArg(args, "autoAck")
	if r.Group, e = nameParam(args, "consumerGroup"); e != nil {
		return e
	}
	if r.Group == "" {
		r.Group = queengo.QueueModeGroup
	}
	mode := string(args.Peek("subscriptionMode"))
	if !args.Has("subscriptionMode") {
		mode = s.cfg.PopSubscriptionMode
	}
	switch mode {
	case "all":
		r.SubMode = queengo.SubscriptionAll
	case "new", "new-only":
		r.SubMode = queengo.SubscriptionNew
	}
	if from := strings.TrimSpace(string(args.Peek("subscriptionFrom"))); from != "" {
		if strings.EqualFold(from, "now") {
			r.SubFromNow = true
		} else if t, ok := parseTime(from); ok {
			r.SubFrom = &t
		}
	}
	return nil
}

// parseTime accepts the ISO-8601 forms clients send: RFC 3339 with or without
// fractional seconds, a local date-time (taken as UTC) or a bare date.
func parseTime(s string) (time.Time, bool) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999Z07:00", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

func boolArg(args *fasthttp.Args, key string) bool {
	v := string(args.Peek(key))
	return v == "true" || v == "1"
}

func (s *Server) handlePopPartition(ctx *fasthttp.RequestCtx) {
	queue, e := pathName(ctx, "queue")
	if e == nil {
		var part string
		if part, e = pathName(ctx, "partition"); e == nil {
			s.pop(ctx, &queengo.PopRequest{Queue: queue, Partition: part})
			return
		}
	}
	s.writeError(ctx, *e)
}

func (s *Server) handlePopQueue(ctx *fasthttp.RequestCtx) {
	queue, e := pathName(ctx, "queue")
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	s.pop(ctx, &queengo.PopRequest{Queue: queue})
}

func (s *Server) handlePopDiscovery(ctx *fasthttp.RequestCtx) {
	args := ctx.QueryArgs()
	r := &queengo.PopRequest{}
	var e *apiError
	if r.Namespace, e = nameParam(args, "namespace"); e == nil {
		r.Task, e = nameParam(args, "task")
	}
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	if r.Namespace == "" && r.Task == "" {
		s.writeScopeRequired(ctx)
		return
	}
	s.pop(ctx, r)
}

func (s *Server) pop(ctx *fasthttp.RequestCtx, r *queengo.PopRequest) {
	defer s.m.popDuration.UpdateDuration(time.Now())
	s.m.popRequests.Inc()
	if e := s.parsePop(ctx.QueryArgs(), r); e != nil {
		s.writeError(ctx, *e)
		return
	}
	// Not ctx: fasthttp cancels it when shutdown begins, and a pop whose
	// claim is in flight must hear its outcome (else its messages wait out
	// their lease). A parked pop ends when its client hangs up.
	pctx := context.Background()
	gone := func() bool { return false }
	if r.Wait {
		var unwatch func()
		pctx, unwatch, gone = s.watch.watch(ctx)
		defer unwatch()
	}
	res, err := s.broker.Pop(pctx, r)
	switch {
	case err == nil && len(res.Messages) > 0 && gone():
		// Hung up since the watcher's last look: nobody reads the answer.
		s.broker.Abandon(res)
		ctx.SetConnectionClose()
	case err != nil:
		s.m.popErrors.Inc()
		s.writeFailure(ctx, popFailure(err), err, "queue", r.Queue)
	case len(res.Messages) == 0:
		s.m.popEmpty.Inc()
		writeNoContent(ctx)
	default:
		s.m.popMessages.Add(len(res.Messages))
		ctx.SetStatusCode(fasthttp.StatusOK)
		ctx.SetContentType("application/json")
		setCORS(ctx)
		ctx.SetBody(appendPopResponse(make([]byte, 0, 256+len(res.Messages)*256), r, &res))
	}
}

// writeScopeRequired is the exact 400 of the discovery route without a scope
// (docs/pop-routes.md).
func (s *Server) writeScopeRequired(ctx *fasthttp.RequestCtx) {
	s.countError(errScopeRequired)
	buf := append(make([]byte, 0, 80), `{"success":false,"error":`...)
	buf = appendString(buf, errScopeRequired.Message)
	buf = append(buf, `,"messages":[]}`...)
	writeJSON(ctx, errScopeRequired.Status, buf)
}

// writeNoContent is the bare 204 of an empty pop: no body, no Content-Type.
func writeNoContent(ctx *fasthttp.RequestCtx) {
	ctx.SetStatusCode(fasthttp.StatusNoContent)
	ctx.Response.ResetBody()
	ctx.Response.Header.SetContentTypeBytes(nil)
	setCORS(ctx)
}

// appendPopResponse writes the response of docs/pop-routes.md; payloads are
// copied as stored, never re-encoded.
func appendPopResponse(buf []byte, r *queengo.PopRequest, res *queengo.PopResult) []byte {
	first := &res.Messages[0]
	buf = append(buf, `{"success":true,"queue":`...)
	buf = appendString(buf, r.Queue)
	buf = append(buf, `,"partition":`...)
	buf = appendString(buf, first.Partition)
	buf = append(buf, `,"partitionId":`...)
	buf = appendUUID(buf, first.PartitionID)
	buf = append(buf, `,"leaseId":`...)
	buf = appendString(buf, res.LeaseID)
	buf = append(buf, `,"consumerGroup":`...)
	buf = appendString(buf, r.Group)
	buf = append(buf, `,"messages":[`...)
	for i := range res.Messages {
		m := &res.Messages[i]
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"id":`...)
		buf = appendUUID(buf, m.ID)
		buf = append(buf, `,"transactionId":`...)
		buf = appendString(buf, m.TransactionID)
		buf = append(buf, `,"traceId":`...)
		buf = appendUUIDOrNull(buf, m.TraceID)
		buf = append(buf, `,"data":`...)
		buf = append(buf, m.Payload...)
		buf = append(buf, `,"producerSub":`...)
		buf = appendStringOrNull(buf, m.ProducerSub)
		buf = append(buf, `,"createdAt":`...)
		buf = appendString(buf, m.CreatedAt)
		buf = append(buf, `,"partitionId":`...)
		buf = appendUUID(buf, m.PartitionID)
		buf = append(buf, `,"partition":`...)
		buf = appendString(buf, m.Partition)
		buf = append(buf, `,"leaseId":`...)
		buf = appendString(buf, res.LeaseID)
		buf = append(buf, `,"consumerGroup":`...)
		buf = appendString(buf, r.Group)
		buf = append(buf, '}')
	}
	buf = append(buf, `],"partitionsClaimed":`...)
	buf = appendInt(buf, res.PartitionsClaimed)
	return append(buf, '}')
}

// clientCheckEvery is how often parked long polls are checked for clients
// that hung up, so a dead client leaves the park within about this long.
const clientCheckEvery = 500 * time.Millisecond

// The watcher peeks at clientCheckSlice sockets, then pauses for
// clientCheckPause. A peek is a system call of a few microseconds: without
// the pauses a scan of 10,000 parked pops kept a broker on one Go processor
// busy for about 40 ms every clientCheckEvery, and while it runs the
// runtime looks at the network only every 10 ms, so /health answered in
// 20 ms at the median. A pause lets the processor idle and find the
// requests that arrived; the 40 pauses of such a scan add 40 ms to it.
const (
	clientCheckSlice = 256
	clientCheckPause = time.Millisecond
)

// clientWatch checks the sockets of parked long polls for hang-ups with one
// goroutine for all of them (a goroutine and a timer per parked pop cost
// about 10 KB each at 10,000 parked pops). It peeks (MSG_PEEK), so a
// pipelined next request is left unread for the server.
type clientWatch struct {
	mu      sync.Mutex
	conns   map[uint64]*watched
	next    uint64
	started bool
	stop    chan struct{}
}

type watched struct {
	raw    syscall.RawConn
	hungUp context.CancelFunc
}

// watch registers the client of a parked pop; the returned context ends when
// it hangs up (found at the watcher's next look). Call unwatch when the pop
// is answered; gone looks at the socket now.
func (cw *clientWatch) watch(ctx *fasthttp.RequestCtx) (pctx context.Context, unwatch func(), gone func() bool) {
	// The request is read; the read timeout's deadline would only make the
	// peek below fail once it passed, hiding a hang-up for the rest of a
	// long poll. The server sets a fresh deadline before the next request.
	_ = ctx.Conn().SetReadDeadline(time.Time{})
	never := func() bool { return false }
	sc, ok := ctx.Conn().(syscall.Conn)
	if !ok {
		return context.Background(), func() {}, never
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return context.Background(), func() {}, never
	}
	pctx, cancel := context.WithCancel(context.Background())
	w := &watched{raw: raw, hungUp: cancel}
	cw.mu.Lock()
	if !cw.started {
		cw.started = true
		go cw.loop()
	}
	cw.next++
	id := cw.next
	cw.conns[id] = w
	cw.mu.Unlock()
	return pctx, func() {
		cw.mu.Lock()
		delete(cw.conns, id)
		cw.mu.Unlock()
		cancel()
	}, func() bool { return hungUp(raw) }
}

func (cw *clientWatch) loop() {
	t := time.NewTicker(clientCheckEvery)
	defer t.Stop()
	var batch []*watched
	var ids []uint64
	for {
		select {
		case <-cw.stop:
			return
		case <-t.C:
		}
		batch, ids = batch[:0], ids[:0]
		cw.mu.Lock()
		for id, w := range cw.conns {
			batch, ids = append(batch, w), append(ids, id)
		}
		cw.mu.Unlock()
		for i, w := range batch {
			if i%clientCheckSlice == clientCheckSlice-1 {
				time.Sleep(clientCheckPause)
			}
			if hungUp(w.raw) {
				w.hungUp()
				cw.mu.Lock()
				delete(cw.conns, ids[i])
				cw.mu.Unlock()
			}
		}
	}
}

// hungUp peeks at the socket: end of stream or an error means the client
// is gone; no data yet (EAGAIN) or pending bytes mean it is still there.
func hungUp(raw syscall.RawConn) bool {
	var b [1]byte
	closed := false
	_ = raw.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = n == 0 && err == nil || err != nil && err != syscall.EAGAIN && err != syscall.EINTR
		return true
	})
	return closed
}
