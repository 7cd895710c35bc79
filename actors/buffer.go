package actors

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
	"github.com/queengo/queengo/actors/filebuffer"
)

// The push buffer (issue 13, D11): pushes PostgreSQL cannot take are
// written to a durable local log (package filebuffer) and answered
// "buffered"; a replay loop stores them later through the normal segment
// path, with their original message and transaction ids, so a record
// replayed twice (a crash between its commit and its file's removal) is
// stored once.
//
// Pushes go to the buffer while it is active: push maintenance is on (the
// switch in queen.system_state, re-read every MaintenanceRefresh), or a push
// found the database unreachable, or records still wait for replay (new
// pushes queue behind them, so a partition keeps its push order). On the
// normal path this costs the push one atomic load.

// Defaults of BufferConfig.
const (
	// BufferMaxBatchDefault caps the records of one replay commit. With
	// the default tick the cap is 40,000 msg/s, above the 26,000 msg/s one
	// replay commit at a time reached uncapped on the 2-core bench box
	// (docs/benchmarks.md): by default replay runs as fast as PostgreSQL
	// commits it, because new pushes queue behind a pending buffer and a
	// slow replay would keep it from draining under load. Lower it (or
	// raise the tick) to leave PostgreSQL room for live work instead.
	BufferMaxBatchDefault = 2000
	// BufferFlushIntervalDefault is the replay loop's tick: one batch per
	// tick at most, and how often an unreachable database is probed.
	BufferFlushIntervalDefault = 50 * time.Millisecond
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

// PushSwitch stores the push maintenance switch for every broker process on
// the database; *pg.Store is one.
type PushSwitch interface {
	PushMaintenance(ctx context.Context) (bool, error)
	SetPushMaintenance(ctx context.Context, on bool) error
}

// FileBuffer is an open buffer directory: the log of pending pushes, and in
// its failed/ subdirectory the records replay could not store.
type FileBuffer struct {
	log, failed *filebuffer.Log
}

// OpenFileBuffer opens (creating) the buffer directory dir; records left by
// an earlier process are replayed once the Broker starts.
func OpenFileBuffer(dir string, o filebuffer.Options) (*FileBuffer, error) {
	l, err := filebuffer.Open(dir, o)
	if err != nil {
		return nil, err
	}
	f, err := filebuffer.Open(filepath.Join(dir, "failed"), o)
	if err != nil {
		l.Close()
		return nil, err
	}
	return &FileBuffer{log: l, failed: f}, nil
}

// Close closes both logs; every acknowledged record is already on disk.
func (f *FileBuffer) Close() {
	f.log.Close()
	f.failed.Close()
}

// BufferConfig configures the push buffer of a Broker.
type BufferConfig struct {
	// Files is the buffer directory; nil: no buffer. A push that finds the
	// database unreachable then fails as before, and under push
	// maintenance pushes fail with queengo.ErrNoBuffer.
	Files *FileBuffer
	// Switch stores push maintenance; nil: it is always off.
	Switch PushSwitch
	// MaxBatch caps the records of one replay commit
	// (BufferMaxBatchDefault).
	MaxBatch int
	// FlushInterval is the replay tick (BufferFlushIntervalDefault): at
	// most one batch per tick, and how often an unreachable database is
	// probed.
	FlushInterval time.Duration
}

// File buffer metrics, exported with the rest on /metrics/prometheus.
var (
	bufferedRecords = metrics.NewCounter(`queengo_file_buffer_records_total{outcome="buffered"}`)
	replayedRecords = metrics.NewCounter(`queengo_file_buffer_records_total{outcome="replayed"}`)
	failedRecords   = metrics.NewCounter(`queengo_file_buffer_records_total{outcome="failed"}`)
	refusedPushes   = metrics.NewCounter(`queengo_file_buffer_refused_pushes_total`)
	// currentBuffer is the process's buffer for the gauges (a process runs
	// one Broker; in tests the last started wins).
	currentBuffer atomic.Pointer[pushBuffer]
	_             = metrics.NewGauge(`queengo_file_buffer_pending_records`, func() float64 {
		return float64(bufferGauge(func(s queengo.BufferStats) float64 { return float64(s.Pending) }))
	})
	_ = metrics.NewGauge(`queengo_file_buffer_bytes`, func() float64 {
		return bufferGauge(func(s queengo.BufferStats) float64 { return float64(s.Bytes) })
	})
	_ = metrics.NewGauge(`queengo_file_buffer_oldest_age_seconds`, func() float64 {
		return bufferGauge(func(s queengo.BufferStats) float64 {
			if s.Oldest.IsZero() {
				return 0
			}
			return time.Since(s.Oldest).Seconds()
		})
	})
	_ = metrics.NewGauge(`queengo_file_buffer_active`, func() float64 {
		return bufferGauge(func(s queengo.BufferStats) float64 {
			if s.Active {
				return 1
			}
			return 0
		})
	})
)

func bufferGauge(f func(queengo.BufferStats) float64) float64 {
	if p := currentBuffer.Load(); p != nil {
		return f(p.stats())
	}
	return 0
}

// pushBuffer is the Broker's side of the file buffer: the switch the push
// path checks, and the replay loop.
type pushBuffer struct {
	b       *Broker
	files   *FileBuffer // nil: no buffer
	sw      PushSwitch  // nil: push maintenance always off
	log     *slog.Logger
	batch   int
	flush   time.Duration
	refresh time.Duration
	timeout time.Duration

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

func newPushBuffer(b *Broker, cfg BufferConfig) *pushBuffer {
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = BufferMaxBatchDefault
	}
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = BufferFlushIntervalDefault
	}
	p := &pushBuffer{b: b, files: cfg.Files, sw: cfg.Switch, log: b.log, batch: cfg.MaxBatch, flush: cfg.FlushInterval,
		refresh: b.cfg.MaintenanceRefresh, timeout: b.cfg.RequestTimeout,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
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
		currentBuffer.Store(p)
	}
	return p
}

// divert writes items to the buffer when it is active and reports whether
// it did (or failed trying); otherwise the push goes to PostgreSQL.
func (p *pushBuffer) divert(items []queengo.PushItem) ([]queengo.PushResult, bool, error) {
	p.gate.RLock()
	defer p.gate.RUnlock()
	if !p.active.Load() {
		return nil, false, nil
	}
	if p.files == nil {
		refusedPushes.Inc()
		return nil, true, queengo.ErrNoBuffer
	}
	res, err := p.write(items)
	return res, true, err
}

// failover writes items to the buffer after a push found the database
// unreachable (err), and turns the buffer on. It reports false, writing
// nothing, when err is no reason to buffer or there is no buffer.
func (p *pushBuffer) failover(items []queengo.PushItem, err error) ([]queengo.PushResult, bool, error) {
	if p.files == nil || !databaseDown(err) || errors.Is(err, queengo.ErrClosed) {
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
func (p *pushBuffer) write(items []queengo.PushItem) ([]queengo.PushResult, error) {
	recs := make([][]byte, len(items))
	now := time.Now().UnixMilli()
	for i := range items {
		recs[i] = encodeItem(nil, &items[i], now)
	}
	if err := p.files.log.Append(recs); err != nil {
		refusedPushes.Inc()
		if errors.Is(err, filebuffer.ErrFull) {
			return nil, fmt.Errorf("%w: %v", queengo.ErrBufferFull, err)
		}
		p.log.Error("file buffer: write failed", "err", err)
		return nil, fmt.Errorf("%w: %v", queengo.ErrBufferWrite, err)
	}
	bufferedRecords.Add(len(items))
	out := make([]queengo.PushResult, len(items))
	for i := range items {
		out[i] = queengo.PushResult{Status: queengo.PushBuffered, TransactionID: items[i].TransactionID,
			MessageID: items[i].ID, TraceID: items[i].TraceID}
	}
	return out, nil
}

// setMaintenance applies the push maintenance switch in this process.
func (p *pushBuffer) setMaintenance(on bool) {
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

// stats reports the buffer as the routes show it.
func (p *pushBuffer) stats() queengo.BufferStats {
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
func (p *pushBuffer) run() {
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
func (p *pushBuffer) step() {
	if p.files == nil {
		p.active.Store(p.maint.Load())
		return
	}
	if p.maint.Load() || !p.active.Load() {
		return
	}
	if p.dbDown.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
		err := p.b.cfg.Store.Ping(ctx)
		cancel()
		if err != nil {
			return
		}
		p.dbDown.Store(false)
		p.log.Warn("file buffer: PostgreSQL answers again; replaying the file buffer")
	}
	if err := p.replayBatch(); err != nil {
		if databaseDown(err) && !errors.Is(err, queengo.ErrClosed) && !p.dbDown.Swap(true) {
			p.failovers.Add(1)
			p.log.Warn("file buffer: PostgreSQL unreachable during replay; will retry", "err", err)
		} else if !databaseDown(err) && time.Since(p.errLogged) >= replayErrorLogEvery {
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
func (p *pushBuffer) replayBatch() error {
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
		res, err := p.b.pushDirect(ctx, items)
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
		failedRecords.Add(len(failed))
	}
	replayedRecords.Add(done - len(failed))
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

// close stops the replay loop; the logs stay open (their owner closes them).
func (p *pushBuffer) close() {
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
