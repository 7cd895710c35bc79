// Package pushbuffer is the push buffer (D11): pushes PostgreSQL cannot take
// are written to a durable local log (package filebuffer) and answered
// "buffered"; a replay loop stores them later through the push function it
// wraps (the actor tree's segment path), with their original message and
// transaction ids, so a record replayed twice (a crash between its commit
// and its file's removal) is stored once.
//
// Pushes go to the buffer while it is active: push maintenance is on (the
// switch in queen.system_state, re-read every Refresh), or a push found the
// database unreachable, or records still wait for replay (new pushes queue
// behind them, so a partition keeps its push order). On the normal path
// this costs a push one atomic load.
package pushbuffer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/google/uuid"

	"github.com/queengo/queengo"
	"github.com/queengo/queengo/cmd/queengo/pushbuffer/filebuffer"
)

// Defaults of Config.
const (
	// MaxBatchDefault caps the records of one replay commit. With
	// the default tick the cap is 40,000 msg/s, above the 26,000 msg/s one
	// replay commit at a time reached uncapped on the 2-core bench box
	// (docs/performance.md "The dated record"): by default replay runs as fast as PostgreSQL
	// commits it, because new pushes queue behind a pending buffer and a
	// slow replay would keep it from draining under load. Lower it (or
	// raise the tick) to leave PostgreSQL room for live work instead.
	MaxBatchDefault = 2000
	// FlushIntervalDefault is the replay loop's tick: one batch per
	// tick at most, and how often an unreachable database is probed.
	FlushIntervalDefault = 50 * time.Millisecond
)

// errReplayStuck is a replay batch that stopped at a record it could not
// store; the loop tries again at its next tick.
var errReplayStuck = errors.New("file buffer: a buffered push could not be stored yet; will retry")

// replayGiveUpAfter is how long the replay retries a buffered push that
// cannot be stored before it moves it to failed/: its failure may pass (a
// queue at maxSize that consumers empty, a database that is read-only
// during a failover, a full disk, a key the broker is restarted with), and
// the pushes after it wait behind it, in order (D11); but a record that
// fails for good must not hold the buffer, and with it every push it
// diverts, for ever.
const replayGiveUpAfter = 30 * time.Minute

// replayErrorLogEvery spaces the log lines of a replay that keeps failing
// (it is retried every tick).
const replayErrorLogEvery = 10 * time.Second

// Switch stores the push maintenance switch for every broker process on the
// database; *pg.Store is one.
type Switch interface {
	PushMaintenance(ctx context.Context) (bool, error)
	SetPushMaintenance(ctx context.Context, on bool) error
}

// Files is an open buffer directory: the log of pending pushes, and in its
// failed/ subdirectory the records replay could not store.
type Files struct {
	log, failed *filebuffer.Log
}

// OpenFiles opens (creating) the buffer directory dir; records left by an
// earlier process are replayed once the Buffer starts.
func OpenFiles(dir string, o filebuffer.Options) (*Files, error) {
	l, err := filebuffer.Open(dir, o)
	if err != nil {
		return nil, err
	}
	f, err := filebuffer.Open(filepath.Join(dir, "failed"), o)
	if err != nil {
		l.Close()
		return nil, err
	}
	return &Files{log: l, failed: f}, nil
}

// Close closes both logs; every acknowledged record is already on disk.
func (f *Files) Close() {
	f.log.Close()
	f.failed.Close()
}

// Push stores items in PostgreSQL and returns one result per item, as the
// actor tree's push does (actors.Broker.Push): the buffer wraps it.
type Push func(ctx context.Context, items []queengo.PushItem) ([]queengo.PushResult, error)

// Config configures a Buffer.
type Config struct {
	// Files is the buffer directory; nil: no buffer. A push that finds the
	// database unreachable then fails as before, and under push
	// maintenance pushes fail with queengo.ErrNoBuffer.
	Files *Files
	// Switch stores push maintenance; nil: it is always off.
	Switch Switch
	// Push is where pushes go when the buffer is not active, and where the
	// replay stores buffered records.
	Push Push
	// Ping reports whether the database answers; the replay probes an
	// unreachable database with it.
	Ping func(ctx context.Context) error
	// MaxBatch caps the records of one replay commit (MaxBatchDefault).
	MaxBatch int
	// FlushInterval is the replay tick (FlushIntervalDefault): at most one
	// batch per tick, and how often an unreachable database is probed.
	FlushInterval time.Duration
	// Refresh is how often the push maintenance switch is re-read, so that
	// a switch made by another broker process takes effect here.
	Refresh time.Duration
	// Timeout bounds each statement of the replay loop (a switch read, a
	// probe, a replay batch).
	Timeout time.Duration
	Logger  *slog.Logger
	// Metrics is the set the buffer's figures are registered in (the
	// broker process's, served on /metrics/prometheus); nil: a set of its
	// own that nothing serves.
	Metrics *metrics.Set
}

// counters are the buffer's counters on /metrics/prometheus.
type counters struct {
	buffered, replayed, failed, refused *metrics.Counter
}

// register adds the buffer's counters and gauges to set.
func (p *Buffer) register(set *metrics.Set) {
	p.count = counters{
		buffered: set.NewCounter(`queengo_file_buffer_records_total{outcome="buffered"}`),
		replayed: set.NewCounter(`queengo_file_buffer_records_total{outcome="replayed"}`),
		failed:   set.NewCounter(`queengo_file_buffer_records_total{outcome="failed"}`),
		refused:  set.NewCounter(`queengo_file_buffer_refused_pushes_total`),
	}
	set.NewGauge(`queengo_file_buffer_pending_records`, func() float64 { return float64(p.Stats().Pending) })
	set.NewGauge(`queengo_file_buffer_bytes`, func() float64 { return float64(p.Stats().Bytes) })
	set.NewGauge(`queengo_file_buffer_oldest_age_seconds`, func() float64 {
		if s := p.Stats(); !s.Oldest.IsZero() {
			return time.Since(s.Oldest).Seconds()
		}
		return 0
	})
	set.NewGauge(`queengo_file_buffer_active`, func() float64 {
		if p.Stats().Active {
			return 1
		}
		return 0
	})
}

// Buffer stands in front of the push path: the switch a push checks, the
// file log it writes to when the buffer is active, and the replay loop.
type Buffer struct {
	files   *Files // nil: no buffer
	sw      Switch // nil: push maintenance always off
	push    Push
	ping    func(ctx context.Context) error
	log     *slog.Logger
	count   counters
	batch   int
	flush   time.Duration
	refresh time.Duration
	timeout time.Duration

	// closing refuses pushes once Close began.
	closing atomic.Bool
	// active is the push path's one check: divert to the buffer.
	active atomic.Bool
	maint  atomic.Bool
	dbDown atomic.Bool
	// switchedAt is when this process last switched push maintenance
	// (unix ns): a refresh read that started before it may have read the
	// switch's previous value, and is ignored.
	switchedAt atomic.Int64
	// gate orders diversions against the replay loop turning active off:
	// a push appends under the read lock, so once the loop holds the write
	// lock and sees nothing pending, no record can land behind its check.
	gate      sync.RWMutex
	failovers atomic.Int64

	// The replay position, owned by the loop; headDone is read by stats.
	head     *filebuffer.File
	headRecs [][]byte
	headDone atomic.Int64
	// stuckSince is when the record at headDone first failed to be stored
	// (zero: it has not); owned by the loop.
	stuckSince time.Time
	// errLogged is when the loop last logged a failed replay.
	errLogged time.Time

	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

// New returns the buffer and starts its replay loop; records left in
// cfg.Files by an earlier process make it active at once.
func New(cfg Config) *Buffer {
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = MaxBatchDefault
	}
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = FlushIntervalDefault
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = queengo.DefaultRequestTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.NewSet()
	}
	p := &Buffer{files: cfg.Files, sw: cfg.Switch, push: cfg.Push, ping: cfg.Ping, log: cfg.Logger,
		batch: cfg.MaxBatch, flush: cfg.FlushInterval, refresh: cfg.Refresh, timeout: cfg.Timeout,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	p.register(cfg.Metrics)
	if p.files != nil {
		st := p.files.log.Stats()
		if st.Cut > 0 {
			p.log.Warn("file buffer: cut torn records left by a crash (never acknowledged)", "bytes", st.Cut)
		}
		if st.Records > 0 {
			p.active.Store(true)
			p.log.Warn("file buffer: records left by an earlier process; pushes go to the buffer until they are replayed",
				"records", st.Records, "files", st.Files)
		}
	}
	go p.run()
	return p
}

// Push stores items through the push function, or writes them to the file
// buffer while it is active, or when the push found the database
// unreachable; then every item answers queengo.PushBuffered. A full buffer
// fails the push with queengo.ErrBufferFull, a failed write with
// queengo.ErrBufferWrite; under push maintenance without a file buffer it
// fails with queengo.ErrNoBuffer. After Close it fails with
// queengo.ErrClosed.
func (p *Buffer) Push(ctx context.Context, items []queengo.PushItem) ([]queengo.PushResult, error) {
	if p.closing.Load() {
		return nil, queengo.ErrClosed
	}
	if p.active.Load() {
		if res, done, err := p.divert(items); done {
			return res, err
		}
	}
	res, err := p.push(ctx, items)
	if err != nil {
		if res, done, berr := p.failover(items, err); done {
			return res, berr
		}
	}
	return res, err
}

// Maintenance reads the push maintenance switch as stored (D11): while it
// is on, every broker process writes pushes to its file buffer.
func (p *Buffer) Maintenance(ctx context.Context) (bool, error) {
	if p.sw == nil {
		return false, nil
	}
	return p.sw.PushMaintenance(ctx)
}

// SetMaintenance switches push maintenance for every broker process on the
// database; here it applies at once, elsewhere at their next refresh.
// Switched off, each process replays its buffer into PostgreSQL, in order.
func (p *Buffer) SetMaintenance(ctx context.Context, on bool) error {
	if p.sw == nil {
		return fmt.Errorf("%w: push maintenance is not available", queengo.ErrNoBuffer)
	}
	if err := p.sw.SetPushMaintenance(ctx, on); err != nil {
		return err
	}
	p.switchedAt.Store(time.Now().UnixNano())
	p.setMaintenance(on)
	return nil
}

// MaintenanceOn is the push maintenance switch as this process applies it
// (re-read every Refresh).
func (p *Buffer) MaintenanceOn() bool { return p.maint.Load() }

// divert writes items to the buffer when it is active and reports whether
// it did (or failed trying); otherwise the push goes to PostgreSQL.
func (p *Buffer) divert(items []queengo.PushItem) ([]queengo.PushResult, bool, error) {
	p.gate.RLock()
	defer p.gate.RUnlock()
	if !p.active.Load() {
		return nil, false, nil
	}
	if p.files == nil {
		p.count.refused.Inc()
		return nil, true, queengo.ErrNoBuffer
	}
	res, err := p.write(items)
	return res, true, err
}

// failover writes items to the buffer after a push found the database
// unreachable (err), and turns the buffer on. It reports false, writing
// nothing, when err is no reason to buffer or there is no buffer.
func (p *Buffer) failover(items []queengo.PushItem, err error) ([]queengo.PushResult, bool, error) {
	if p.files == nil || !queengo.DatabaseDown(err) || errors.Is(err, queengo.ErrClosed) {
		return nil, false, nil
	}
	p.gate.RLock()
	defer p.gate.RUnlock()
	if !p.dbDown.Swap(true) {
		p.failovers.Add(1)
		p.log.Warn("file buffer: PostgreSQL unreachable for a push; pushes go to the file buffer", "err", err)
	}
	p.active.Store(true)
	res, werr := p.write(items)
	return res, true, werr
}

// write appends items to the log, one record each, and answers them
// buffered.
func (p *Buffer) write(items []queengo.PushItem) ([]queengo.PushResult, error) {
	recs := make([][]byte, len(items))
	now := time.Now().UnixMilli()
	for i := range items {
		recs[i] = encodeItem(nil, &items[i], now)
	}
	if err := p.files.log.Append(recs); err != nil {
		p.count.refused.Inc()
		if errors.Is(err, filebuffer.ErrFull) {
			return nil, fmt.Errorf("%w: %v", queengo.ErrBufferFull, err)
		}
		p.log.Error("file buffer: write failed", "err", err)
		return nil, fmt.Errorf("%w: %v", queengo.ErrBufferWrite, err)
	}
	p.count.buffered.Add(len(items))
	out := make([]queengo.PushResult, len(items))
	for i := range items {
		out[i] = queengo.PushResult{Status: queengo.PushBuffered, TransactionID: items[i].TransactionID,
			MessageID: items[i].ID, TraceID: items[i].TraceID}
	}
	return out, nil
}

// setMaintenance applies the push maintenance switch in this process.
func (p *Buffer) setMaintenance(on bool) {
	if p.maint.Swap(on) == on {
		return
	}
	if on {
		p.active.Store(true)
		p.log.Warn("file buffer: push maintenance on; pushes go to the file buffer")
	} else {
		p.log.Warn("file buffer: push maintenance off; replaying the file buffer")
	}
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Stats reports the buffer as the routes show it.
func (p *Buffer) Stats() queengo.BufferStats {
	s := queengo.BufferStats{Active: p.active.Load(), DBHealthy: !p.dbDown.Load(), Failovers: p.failovers.Load(),
		Healthy: true}
	if p.files == nil {
		return s
	}
	ls, fs := p.files.log.Stats(), p.files.failed.Stats()
	s.Enabled = true
	s.Pending = max(0, ls.Records-p.headDone.Load())
	s.Bytes, s.Files, s.Oldest, s.Healthy = ls.Bytes, ls.Files, ls.Oldest, ls.Healthy && fs.Healthy
	s.Failed, s.FailedBytes = fs.Records, fs.Bytes
	return s
}

// run is the replay loop: it re-reads the switch, probes an unreachable
// database, replays at most one batch per tick, and turns the buffer off
// once it is empty.
func (p *Buffer) run() {
	defer close(p.done)
	tick := time.NewTicker(p.flush)
	defer tick.Stop()
	var lastRead time.Time
	for {
		if p.sw != nil && time.Since(lastRead) >= p.refresh {
			lastRead = time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
			on, err := p.sw.PushMaintenance(ctx)
			cancel()
			if err == nil && lastRead.UnixNano() > p.switchedAt.Load() {
				p.setMaintenance(on)
			}
		}
		p.step()
		select {
		case <-p.stop:
			return
		case <-tick.C:
		case <-p.kick:
		}
	}
}

// step is one tick of the replay loop.
func (p *Buffer) step() {
	if p.files == nil {
		p.active.Store(p.maint.Load())
		return
	}
	if p.maint.Load() || !p.active.Load() {
		return
	}
	if p.dbDown.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
		err := p.ping(ctx)
		cancel()
		if err != nil {
			return
		}
		p.dbDown.Store(false)
		p.log.Warn("file buffer: PostgreSQL answers again; replaying the file buffer")
	}
	if err := p.replayBatch(); err != nil {
		if queengo.DatabaseDown(err) && !errors.Is(err, queengo.ErrClosed) && !p.dbDown.Swap(true) {
			p.failovers.Add(1)
			p.log.Warn("file buffer: PostgreSQL unreachable during replay; will retry", "err", err)
		} else if !queengo.DatabaseDown(err) && time.Since(p.errLogged) >= replayErrorLogEvery {
			p.errLogged = time.Now()
			p.log.Error("file buffer: replay failed; will retry", "err", err)
		}
		return
	}
	p.gate.Lock()
	defer p.gate.Unlock()
	if p.head == nil && p.files.log.Stats().Records == 0 && !p.maint.Load() && !p.dbDown.Load() && p.active.Load() {
		p.active.Store(false)
		p.log.Warn("file buffer: drained; pushes go to PostgreSQL again")
	}
}

// replayBatch stores the next batch of at most p.batch records, in file
// order, and removes a file once all its records are stored. It stops at a
// record that could not be stored (errReplayStuck): that record and the ones
// after it are tried again at the next tick, in order (those stored
// meanwhile come back duplicate, as their transaction ids are kept), until
// it has failed for replayGiveUpAfter and moves to failed/. An undecodable
// record moves to failed/ at once.
func (p *Buffer) replayBatch() error {
	if p.head == nil {
		files := p.files.log.Files()
		if len(files) == 0 {
			// The records wait in the current file: end it, so that new
			// pushes go to a next one while this one is replayed.
			p.files.log.Seal()
			if files = p.files.log.Files(); len(files) == 0 {
				return nil
			}
		}
		recs, err := p.files.log.Read(files[0])
		if err != nil {
			return err
		}
		p.head, p.headRecs = &files[0], recs
		p.headDone.Store(0)
	}
	start := int(p.headDone.Load())
	recs := p.headRecs[start:min(start+p.batch, len(p.headRecs))]
	items := make([]queengo.PushItem, 0, len(recs))
	at := make([]int, 0, len(recs)) // the record of each item, in recs
	var bad []int
	for i, rec := range recs {
		it, err := decodeItem(rec)
		if err != nil {
			bad = append(bad, i)
			continue
		}
		items, at = append(items, it), append(at, i)
	}
	done := len(recs) // the records of recs this batch settles
	var failed [][]byte
	var stuck error
	if len(items) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
		res, err := p.push(ctx, items)
		cancel()
		if err != nil {
			return err
		}
		if k := slices.IndexFunc(res, func(r queengo.PushResult) bool { return r.Status == queengo.PushFailed }); k < 0 {
			p.stuckSince = time.Time{}
		} else {
			it := &items[k]
			done = at[k]
			stuck = fmt.Errorf("%w: queue %q partition %q transaction %q: %v", errReplayStuck, it.Queue, it.Partition,
				it.TransactionID, res[k].Err)
			switch {
			case p.stuckSince.IsZero():
				p.stuckSince = time.Now()
			case time.Since(p.stuckSince) >= replayGiveUpAfter:
				p.log.Error("file buffer: a buffered push could not be stored for "+replayGiveUpAfter.String()+
					"; kept in failed/", "queue", it.Queue, "partition", it.Partition, "transactionId", it.TransactionID,
					"err", res[k].Err)
				failed = append(failed, encodeItem(nil, it, time.Now().UnixMilli()))
				p.stuckSince, done = time.Time{}, at[k]+1
			}
		}
	}
	for _, i := range bad {
		if i < done {
			p.log.Error("file buffer: an undecodable record; kept in failed/")
			failed = append(failed, recs[i])
		}
	}
	if len(failed) > 0 {
		// Never dropped: a record that cannot be stored moves to failed/
		// before its file may go.
		if err := p.files.failed.Append(failed); err != nil {
			return fmt.Errorf("error keeping records that failed replay: %w", err)
		}
		p.count.failed.Add(len(failed))
	}
	p.count.replayed.Add(done - len(failed))
	p.headDone.Store(int64(start + done))
	if start+done == len(p.headRecs) {
		if err := p.files.log.Remove(*p.head); err != nil {
			return err
		}
		p.head, p.headRecs = nil, nil
		p.headDone.Store(0)
	}
	return stuck
}

// Close refuses further pushes and stops the replay loop; the files stay
// open (their owner closes them).
func (p *Buffer) Close() {
	if p.closing.Swap(true) {
		return
	}
	close(p.stop)
	<-p.done
}

// itemVersion is the first byte of an encoded item, so that a later format
// can be told apart.
const itemVersion = 1

// encodeItem appends one push item as a buffer record: the version, the
// time it was buffered (unix ms), queue, partition, message id, transaction
// id, trace id, producerSub and the payload (the rest of the record).
func encodeItem(dst []byte, it *queengo.PushItem, at int64) []byte {
	dst = append(dst, itemVersion)
	dst = binary.AppendUvarint(dst, uint64(at))
	dst = appendField(dst, it.Queue)
	dst = appendField(dst, it.Partition)
	dst = append(dst, it.ID[:]...)
	dst = appendField(dst, it.TransactionID)
	dst = append(dst, it.TraceID[:]...)
	dst = appendField(dst, it.ProducerSub)
	return append(dst, it.Payload...)
}

func appendField(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

var errBadRecord = errors.New("malformed file buffer record")

// decodeItem reads a record written by encodeItem; the item's strings and
// payload are copies, independent of rec.
func decodeItem(rec []byte) (queengo.PushItem, error) {
	var it queengo.PushItem
	if len(rec) == 0 || rec[0] != itemVersion {
		return it, errBadRecord
	}
	r := rec[1:]
	if _, n := binary.Uvarint(r); n <= 0 {
		return it, errBadRecord
	} else {
		r = r[n:]
	}
	var ok bool
	if it.Queue, r, ok = readField(r); !ok {
		return it, errBadRecord
	}
	if it.Partition, r, ok = readField(r); !ok {
		return it, errBadRecord
	}
	if len(r) < 16 {
		return it, errBadRecord
	}
	it.ID, r = uuid.UUID(r[:16]), r[16:]
	if it.TransactionID, r, ok = readField(r); !ok {
		return it, errBadRecord
	}
	if len(r) < 16 {
		return it, errBadRecord
	}
	it.TraceID, r = uuid.UUID(r[:16]), r[16:]
	if it.ProducerSub, r, ok = readField(r); !ok {
		return it, errBadRecord
	}
	if it.Queue == "" || it.Partition == "" || it.TransactionID == "" || len(r) == 0 {
		return it, errBadRecord
	}
	it.Payload = append([]byte(nil), r...)
	return it, nil
}

func readField(r []byte) (string, []byte, bool) {
	n, k := binary.Uvarint(r)
	if k <= 0 || n > uint64(len(r)-k) {
		return "", nil, false
	}
	return string(r[k : k+int(n)]), r[k+int(n):], true
}
