package pg

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queengo/queengo"
)

// Append writes frames as one segment of the partition in one statement and
// one commit. The frames must carry distinct transaction ids. It returns, per
// frame, the id of the stored message it duplicates, or uuid.Nil when the
// frame was written. A partition that no longer exists fails with an error
// wrapping queengo.ErrNotFound.
func (s *Store) Append(ctx context.Context, partition uuid.UUID, frames []queengo.Frame) ([]uuid.UUID, error) {
	txids := make([]string, len(frames))
	ids := make([]uuid.UUID, len(frames))
	enc := make([][]byte, len(frames))
	size := 0
	for i := range frames {
		size += 40 + len(frames[i].TransactionID) + len(frames[i].ProducerSub) + len(frames[i].Payload)
	}
	buf := make([]byte, 0, size)
	for i := range frames {
		f := &frames[i]
		txids[i] = f.TransactionID
		ids[i] = f.ID
		start := len(buf)
		buf = appendFrame(buf, f)
		enc[i] = buf[start:len(buf):len(buf)]
	}
	var dups []pgtype.UUID
	err := s.withConn(ctx, func(c *pgxpool.Conn) error {
		return c.QueryRow(ctx, `SELECT queen.append_segment($1, $2, $3, $4)`, partition, txids, ids, enc).Scan(&dups)
	})
	if err != nil {
		return nil, fmt.Errorf("error appending segment: %w", err)
	}
	out := make([]uuid.UUID, len(frames))
	for i := range dups {
		if dups[i].Valid {
			out[i] = dups[i].Bytes
		}
	}
	return out, nil
}
