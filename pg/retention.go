package pg

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/queengo/queengo"
)

// The statements of the retention service (sql/functions/retention.sql;
// docs/retention.md "Retention and eviction").

// RetentionConn is a connection of the retention service's own, outside the
// pool like the listener's (application_name queengo-leader): the leader
// locks and every statement of the service's jobs run on it, so background
// work never takes a pooled connection from the requests and costs at most
// this one connection beyond the pool. Each operation is bounded by the
// request timeout and ends with its context. It is not safe for concurrent
// use.
type RetentionConn struct {
	c       *pgx.Conn
	timeout time.Duration
}

// ConnectRetention opens a RetentionConn. Connecting is bounded by the
// request timeout and ends with ctx.
func (s *Store) ConnectRetention(ctx context.Context) (*RetentionConn, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	cfg := s.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = leaderApp
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("error connecting: %w", translateCtx(ctx, err))
	}
	return &RetentionConn{c: c, timeout: s.cfg.RequestTimeout}, nil
}

// leaderApp is the application_name of retention connections.
const leaderApp = "queengo-leader"

// Close closes the connection, which releases any lock it still holds.
func (l *RetentionConn) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), cancelGrace)
	defer cancel()
	_ = l.c.Close(ctx)
}

// tx runs fn inside a transaction, under do.
func (l *RetentionConn) tx(ctx context.Context, fn func(context.Context, pgx.Tx) error) error {
	return l.do(ctx, func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, l.c, func(tx pgx.Tx) error { return fn(ctx, tx) })
	})
}

// do runs fn under ctx bounded by the request timeout (as Store.bound does
// for a request, but ending with ctx too) and translates its failure.
func (l *RetentionConn) do(ctx context.Context, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	return translateCtx(ctx, fn(ctx))
}

// Lead runs fn while the connection holds the cluster-wide lock of job, a
// session advisory lock, so of several broker processes on one database one
// runs the job and the others skip it. It returns false without running fn
// when another session holds the lock, and releases the lock after fn.
// Should the connection break during the run, the server drops the lock and
// another process may start a run meanwhile; the batches' row locks keep two
// runs correct, they only duplicate some work.
func (l *RetentionConn) Lead(ctx context.Context, job string, fn func(context.Context) error) (bool, error) {
	key := leaderKey(job)
	var ok bool
	err := l.do(ctx, func(ctx context.Context) error {
		return l.c.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&ok)
	})
	if err != nil {
		return false, fmt.Errorf("error taking the %s lock: %w", job, err)
	}
	if !ok {
		return false, nil
	}
	err = fn(ctx)
	uerr := l.do(ctx, func(ctx context.Context) error {
		_, err := l.c.Exec(ctx, "SELECT pg_advisory_unlock($1)", key)
		return err
	})
	if err == nil && uerr != nil {
		// The connection is likely broken; closing it drops the lock.
		err = fmt.Errorf("error releasing the %s lock: %w", job, uerr)
	}
	return true, err
}

// leaderKey is the advisory lock key of a job: a hash of its name, apart
// from migrateLockKey and from the two-key locks append_segments takes.
func leaderKey(job string) int64 {
	h := fnv.New64a()
	h.Write([]byte("queengo leader " + job))
	return int64(h.Sum64())
}

// RetentionTargets lists, in id order, the partitions whose oldest segment
// retention may drop now, or that have a cursor behind their oldest retained
// offset.
func (l *RetentionConn) RetentionTargets(ctx context.Context) ([]uuid.UUID, error) {
	var out []uuid.UUID
	err := l.do(ctx, func(ctx context.Context) error {
		rows, err := l.c.Query(ctx, `SELECT * FROM queen.retention_targets()`)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (uuid.UUID, error) {
			var id pgtype.UUID
			err := r.Scan(&id)
			return id.Bytes, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("error listing retention targets: %w", err)
	}
	return out, nil
}

// frameHeadMax is how much of each frame a retention batch reads to find its
// transaction id: flags, message id, trace id, and a length-prefixed id of
// up to the 1024 bytes the API accepts, with room to spare. A longer id
// (none is accepted today) costs a second read of that frame, not a failure.
const frameHeadMax = 2048

// DropSegments runs one retention batch in one transaction: it drops the
// droppable prefix of the partitions parts (in their order) until about
// limit messages are dropped, with their transaction ids and attempt
// counts, and moves the cursors behind it to the oldest retained offset. It
// returns what it dropped and how many leading partitions of parts are
// finished; the caller goes on with the rest.
func (l *RetentionConn) DropSegments(ctx context.Context, parts []uuid.UUID, limit int) (queengo.Dropped, int, error) {
	var d queengo.Dropped
	var done int
	err := l.tx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT kind, partition_id, first_offset, bytes, heads, floor, done
FROM queen.retention_take($1, $2, $3)`, pgUUIDs(parts), limit, frameHeadMax)
		if err != nil {
			return err
		}
		var (
			floorParts, segParts, txParts []pgtype.UUID
			floors, segFirsts             []int64
			txids                         []string
			kind                          string
			pid                           pgtype.UUID
			first, bytes, floor           pgtype.Int8
			heads                         [][]byte
			n                             pgtype.Int4
			long                          []frameRef
		)
		_, err = pgx.ForEachRow(rows, []any{&kind, &pid, &first, &bytes, &heads, &floor, &n}, func() error {
			switch kind {
			case "part":
				floorParts, floors = append(floorParts, pid), append(floors, floor.Int64)
			case "seg":
				segParts, segFirsts = append(segParts, pid), append(segFirsts, first.Int64)
				d.Segments++
				d.Messages += int64(len(heads))
				d.Bytes += bytes.Int64
				for k, h := range heads {
					id, err := frameTxID(h)
					if errors.Is(err, errCorruptFrame) && len(h) == frameHeadMax {
						long = append(long, frameRef{pid, first.Int64, k})
						continue
					}
					if err != nil {
						return fmt.Errorf("segment %d of partition %s, frame %d: %w",
							first.Int64, uuid.UUID(pid.Bytes), k, err)
					}
					txParts, txids = append(txParts, pid), append(txids, id)
				}
			case "end":
				done = int(n.Int32)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, f := range long {
			var frame []byte
			if err := tx.QueryRow(ctx, `SELECT queen.frame_at(frames, ends, $3) FROM queen.segments
WHERE partition_id = $1 AND first_offset = $2`, f.partition, f.first, f.k).Scan(&frame); err != nil {
				return err
			}
			id, err := frameTxID(frame)
			if err != nil {
				return fmt.Errorf("segment %d of partition %s, frame %d: %w", f.first, uuid.UUID(f.partition.Bytes), f.k, err)
			}
			txParts, txids = append(txParts, f.partition), append(txids, id)
		}
		_, err = tx.Exec(ctx, `SELECT queen.retention_drop($1, $2, $3, $4, $5, $6)`,
			floorParts, floors, segParts, segFirsts, txParts, txids)
		return err
	})
	if err != nil {
		return queengo.Dropped{}, 0, fmt.Errorf("error dropping segments: %w", err)
	}
	return d, done, nil
}

// frameRef is frame k of the segment at first in a partition.
type frameRef struct {
	partition pgtype.UUID
	first     int64
	k         int
}

// frameTxID reads the transaction id of the frame that starts b (b may end
// after the id).
func frameTxID(b []byte) (string, error) {
	if len(b) < 17 {
		return "", errCorruptFrame
	}
	flags := b[0]
	b = b[17:]
	if flags&frameHasTrace != 0 {
		if len(b) < 16 {
			return "", errCorruptFrame
		}
		b = b[16:]
	}
	id, _, err := readBytes(b)
	return string(id), err
}

// EvictionTargets lists, in (partition, group) order, the cursors whose
// first unconsumed message waited longer than its queue's
// maxWaitTimeSeconds and that no consumer holds a live lease on; a
// partition without any cursor is listed for queue mode unless a named
// group consumes the queue. It first forgets the queue-mode cursors an
// earlier eviction made on partitions a named group reached since
// (queen.forget_evicted_cursors).
func (l *RetentionConn) EvictionTargets(ctx context.Context) ([]queengo.CursorKey, error) {
	var out []queengo.CursorKey
	err := l.do(ctx, func(ctx context.Context) error {
		if _, err := l.c.Exec(ctx, `SELECT queen.forget_evicted_cursors()`); err != nil {
			return err
		}
		rows, err := l.c.Query(ctx, `SELECT partition_id, consumer_group FROM queen.eviction_targets()`)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (queengo.CursorKey, error) {
			var k queengo.CursorKey
			var id pgtype.UUID
			err := r.Scan(&id, &k.Group)
			k.Partition = id.Bytes
			return k, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("error listing eviction targets: %w", err)
	}
	return out, nil
}

// Evict runs one eviction batch in one transaction: for the cursors
// targets (in their order) it dead-letters the messages that waited longer
// than maxWaitTimeSeconds without being consumed, and moves each cursor past
// them, until about limit messages are evicted. It returns how many dead
// letters it wrote and how many leading targets are finished.
func (l *RetentionConn) Evict(ctx context.Context, targets []queengo.CursorKey, limit int) (int64, int, error) {
	parts := make([]pgtype.UUID, len(targets))
	groups := make([]string, len(targets))
	for i, t := range targets {
		parts[i], groups[i] = pgUUID(t.Partition), t.Group
	}
	var done int32
	var evicted int64
	err := l.do(ctx, func(ctx context.Context) error {
		return l.c.QueryRow(ctx, `SELECT done, evicted FROM queen.evict($1, $2, $3)`, parts, groups, limit).Scan(&done, &evicted)
	})
	if err != nil {
		return 0, 0, fmt.Errorf("error evicting: %w", err)
	}
	return evicted, int(done), nil
}

// RemoveIdlePartitions deletes up to limit partitions that hold no segment
// and saw no write, consumer or dead letter for idle, with their cursors
// and dead letters; a partition in use at that moment is kept. It returns
// how many it deleted.
func (l *RetentionConn) RemoveIdlePartitions(ctx context.Context, idle time.Duration, limit int) (int, error) {
	var n int32
	err := l.do(ctx, func(ctx context.Context) error {
		return l.c.QueryRow(ctx, `SELECT queen.remove_idle_partitions($1, $2)`, idle, limit).Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("error removing idle partitions: %w", err)
	}
	return int(n), nil
}

// OldestMessages returns, per queue that holds any, the createdAt of its
// oldest retained message.
func (l *RetentionConn) OldestMessages(ctx context.Context) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	err := l.do(ctx, func(ctx context.Context) error {
		rows, err := l.c.Query(ctx, `SELECT queue_name, oldest FROM queen.oldest_messages()`)
		if err != nil {
			return err
		}
		var name string
		var oldest time.Time
		_, err = pgx.ForEachRow(rows, []any{&name, &oldest}, func() error {
			out[name] = oldest
			return nil
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("error reading the oldest messages: %w", err)
	}
	return out, nil
}
