package queengo

import (
	"errors"
	"time"
)

// PushBuffered is the outcome of an item written to the broker's file buffer
// instead of PostgreSQL (push maintenance, or the database unreachable): it
// is stored when the buffer is replayed, with its transaction id, so a
// replay after a crash stores it once.
const PushBuffered PushStatus = "buffered"

// The file buffer's failures (issue 13). Each has its row in http/errors.go.
var (
	// ErrBufferFull: the file buffer holds FILE_BUFFER_MAX_BYTES; nothing of
	// the push was written.
	ErrBufferFull = errors.New("file buffer is full")
	// ErrBufferWrite: writing the file buffer failed (a disk error); the
	// push was not acknowledged and may be sent again.
	ErrBufferWrite = errors.New("file buffer write failed")
	// ErrNoBuffer: push maintenance is on and this broker has no file
	// buffer (FILE_BUFFER_DIR) to take the push.
	ErrNoBuffer = errors.New("push maintenance is on and this broker has no file buffer")
)

// BufferStats describe a broker's file buffer (GET /api/v1/system/maintenance,
// /api/v1/status/buffers).
type BufferStats struct {
	// Enabled is false when the broker runs without FILE_BUFFER_DIR.
	Enabled bool
	// Active is true while pushes go to the buffer: push maintenance, the
	// database unreachable, or records still waiting for replay (new pushes
	// queue behind them so that each partition keeps its push order).
	Active bool
	// Pending is the records not yet stored in PostgreSQL; Bytes and Files
	// their size on disk.
	Pending int64
	Bytes   int64
	Files   int
	// Failed is the records replay could not store (a data reason, such as
	// a full queue), kept in the failed/ subdirectory; FailedBytes their size.
	Failed      int64
	FailedBytes int64
	// Failovers counts the switches to the buffer because the database was
	// unreachable, since the process started.
	Failovers int64
	// DBHealthy is false while the database is considered unreachable.
	DBHealthy bool
	// Healthy is false once a buffer write failed (disk error).
	Healthy bool
	// Oldest is when the oldest pending file was started; zero when empty.
	Oldest time.Time
}
