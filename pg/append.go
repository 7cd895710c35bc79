package pg

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queengo/queengo"
)

// Append writes each segment to its partition, all in one statement and one
// commit. The partitions must be distinct and the frames of a segment must
// carry distinct transaction ids. It returns, per segment and frame, the id
// of the stored message the frame duplicates, uuid.Nil when it was written,
// or queengo.QueueFullMark when it was refused because its queue holds
// maxSize unconsumed messages (the other frames are written). A partition
// that no longer exists fails the whole call with an error wrapping
// queengo.ErrNotFound. The payloads of a segment with Seal are sealed with
// the store's encryption key; without one the call fails with
// queengo.ErrEncryptionUnavailable. A segment without Seal for a queue with
// encryptionEnabled fails the whole call with queengo.ErrQueueChanged.
func (s *Store) Append(ctx context.Context, segs []queengo.Segment) ([][]uuid.UUID, error) {
	var out [][]uuid.UUID
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		var err error
		if len(segs) == 1 && s.citus.Load() {
			out, err = writeOne(ctx, c, segs[0], s.seal)
			return err
		}
		out, err = writeSegments(ctx, c, segs, s.seal)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("error appending segments: %w", err)
	}
	return out, nil
}

// appendSegments is Append for a caller that writes everything or nothing (a
// transaction, a dead letter's requeue): a frame its queue has no room for
// fails the call with an error wrapping queengo.ErrQueueFull, and the caller
// rolls back what the statement wrote.
func appendSegments(ctx context.Context, q querier, segs []queengo.Segment, key *sealKey) ([][]uuid.UUID, error) {
	out, err := writeSegments(ctx, q, segs, key)
	if err != nil {
		return nil, err
	}
	for i := range out {
		for j, d := range out[i] {
			if d == queengo.QueueFullMark {
				return nil, fmt.Errorf("%w: transaction id %q", queengo.ErrQueueFull, segs[i].Frames[j].TransactionID)
			}
		}
	}
	return out, nil
}

// writeSegments encodes the segments, sealing those with Seal with key
// (nil: the store has none), and writes them.
func writeSegments(ctx context.Context, q querier, segs []queengo.Segment, key *sealKey) ([][]uuid.UUID, error) {
	w, err := encodeSegments(segs, key)
	if err != nil {
		return nil, err
	}
	var dups []pgtype.UUID
	if err := q.QueryRow(ctx, appendSQL, w.args...).Scan(&dups); err != nil {
		return nil, err
	}
	return w.dups(dups), nil
}

// writeOne writes a segment with queen.append_one (the Citus mode,
// sql/citus/functions.sql), a statement of its own, so Citus runs the whole
// function on the node that owns the partition.
func writeOne(ctx context.Context, q querier, seg queengo.Segment, key *sealKey) ([][]uuid.UUID, error) {
	w, err := encodeSegments([]queengo.Segment{seg}, key)
	if err != nil {
		return nil, err
	}
	var dups []pgtype.UUID
	if err := q.QueryRow(ctx, appendOneSQL, w.args[0].([]pgtype.UUID)[0], w.args[2], w.args[3], w.args[4]).Scan(&dups); err != nil {
		return nil, err
	}
	return w.dups(dups), nil
}

// appendOneSQL writes one partition's segment in the Citus mode.
const appendOneSQL = `SELECT queen.append_one($1, $2, $3, $4)`

// appendSQL writes segments: queen.append_segments, which answers per frame
// the id of the stored message it duplicates.
const appendSQL = `SELECT queen.append_segments($1, $2, $3, $4, $5)`

// segmentWrite is the append_segments call of some segments, encoded.
type segmentWrite struct {
	segs []queengo.Segment
	args []any
}

// encodeSegments encodes the segments for appendSQL, sealing those with Seal
// with key (nil: the store has none).
func encodeSegments(segs []queengo.Segment, key *sealKey) (*segmentWrite, error) {
	n, size, sealed := 0, 0, 0
	for i := range segs {
		if segs[i].Seal {
			if key == nil {
				return nil, queengo.ErrEncryptionUnavailable
			}
			sealed += len(segs[i].Frames)
		}
		for j := range segs[i].Frames {
			f := &segs[i].Frames[j]
			n++
			size += 40 + len(f.TransactionID) + len(f.ProducerSub) + len(f.Payload)
		}
	}
	var seal *sealer
	if sealed > 0 {
		seal = &sealer{key: key}
		seal.reserve(sealed)
		size += sealed * sealedOverhead
	}
	parts := make([]uuid.UUID, len(segs))
	seg := make([]int32, 0, n)
	txids := make([]string, 0, n)
	ids := make([]uuid.UUID, 0, n)
	enc := make([][]byte, 0, n)
	buf := make([]byte, 0, size)
	for i := range segs {
		parts[i] = segs[i].Partition
		var sl *sealer
		if segs[i].Seal {
			sl = seal
		}
		for j := range segs[i].Frames {
			f := &segs[i].Frames[j]
			seg = append(seg, int32(i+1))
			txids = append(txids, f.TransactionID)
			ids = append(ids, f.ID)
			start := len(buf)
			buf = appendFrame(buf, f, sl)
			enc = append(enc, buf[start:len(buf):len(buf)])
		}
	}
	return &segmentWrite{segs: segs, args: []any{pgUUIDs(parts), seg, txids, pgUUIDs(ids), enc}}, nil
}

// queue adds the call to b.
func (w *segmentWrite) queue(b *pgx.Batch) { b.Queue(appendSQL, w.args...) }

// dups turns append_segments' answer into Append's: per segment and frame,
// the id of the message the frame duplicates, else uuid.Nil.
func (w *segmentWrite) dups(raw []pgtype.UUID) [][]uuid.UUID {
	out := make([][]uuid.UUID, len(w.segs))
	k := 0
	for i := range w.segs {
		out[i] = make([]uuid.UUID, len(w.segs[i].Frames))
		for j := range out[i] {
			if raw[k].Valid {
				out[i][j] = raw[k].Bytes
			}
			k++
		}
	}
	return out
}
