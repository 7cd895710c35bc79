package pg

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queengo/queengo"
)

// Append writes each segment to its partition, all in one statement and one
// commit. The partitions must be distinct and the frames of a segment must
// carry distinct transaction ids. It returns, per segment and frame, the id
// of the stored message the frame duplicates, or uuid.Nil when it was
// written. A partition that no longer exists fails the whole call with an
// error wrapping queengo.ErrNotFound.
func (s *Store) Append(ctx context.Context, segs []queengo.Segment) ([][]uuid.UUID, error) {
	var out [][]uuid.UUID
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		var err error
		out, err = appendSegments(ctx, c, segs)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("error appending segments: %w", err)
	}
	return out, nil
}

func appendSegments(ctx context.Context, q querier, segs []queengo.Segment) ([][]uuid.UUID, error) {
	n, size := 0, 0
	for i := range segs {
		for j := range segs[i].Frames {
			f := &segs[i].Frames[j]
			n++
			size += 40 + len(f.TransactionID) + len(f.ProducerSub) + len(f.Payload)
		}
	}
	parts := make([]uuid.UUID, len(segs))
	seg := make([]int32, 0, n)
	txids := make([]string, 0, n)
	ids := make([]uuid.UUID, 0, n)
	enc := make([][]byte, 0, n)
	buf := make([]byte, 0, size)
	for i := range segs {
		parts[i] = segs[i].Partition
		for j := range segs[i].Frames {
			f := &segs[i].Frames[j]
			seg = append(seg, int32(i+1))
			txids = append(txids, f.TransactionID)
			ids = append(ids, f.ID)
			start := len(buf)
			buf = appendFrame(buf, f)
			enc = append(enc, buf[start:len(buf):len(buf)])
		}
	}
	var dups []pgtype.UUID
	if err := q.QueryRow(ctx, `SELECT queen.append_segments($1, $2, $3, $4, $5)`, pgUUIDs(parts), seg, txids, pgUUIDs(ids), enc).Scan(&dups); err != nil {
		return nil, err
	}
	out := make([][]uuid.UUID, len(segs))
	k := 0
	for i := range segs {
		out[i] = make([]uuid.UUID, len(segs[i].Frames))
		for j := range out[i] {
			if dups[k].Valid {
				out[i][j] = dups[k].Bytes
			}
			k++
		}
	}
	return out, nil
}
