// Package filebuffer is the broker's durable local log of pushes it could not
// hand to PostgreSQL (push maintenance, or the database unreachable): an
// append-only sequence of files in one directory, each a run of records
//
//	length (uint32, little endian) | CRC-32C of length and payload (uint32) | payload
//
// Append writes a batch of records and fsyncs it before it returns; appends
// that arrive while one is being written ride in the next write, so one
// fsync carries every append that was waiting (group commit). A file is
// rotated after Options.EventsPerFile records or Options.FileBytes bytes.
// Files are replayed oldest first (Files, Read) and removed once their
// records are stored elsewhere (Remove).
//
// A crash can leave the last record of a file half written. Open cuts every
// file at its first record whose length or checksum does not hold: such a
// record was never acknowledged (its fsync did not return), and whatever
// follows it cannot be framed. The package does only file I/O; it knows
// nothing of what a record means.
package filebuffer

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Defaults of Options.
const (
	// EventsPerFileDefault is the reference server's
	// FILE_BUFFER_EVENTS_PER_FILE: files of about a few MB at typical
	// payload sizes, so a replayed file is read whole without strain.
	EventsPerFileDefault = 10_000
	// FileBytesDefault rotates a file of large records before it reaches
	// the events limit: replay reads one file into memory at a time.
	FileBytesDefault = 64 << 20
	// MaxBytesDefault caps the whole log: a full disk would fail every
	// write of the host, not only this broker's.
	MaxBytesDefault = 1 << 30
)

// MaxRecord is the largest record payload accepted (and the largest length
// the reader believes): a push body is capped well below it.
const MaxRecord = 64 << 20

// headerSize is the length and checksum in front of each payload.
const headerSize = 8

// suffix names the log's files: a zero-padded sequence number and this.
const suffix = ".qbuf"

var (
	// ErrFull: the records would take the log past Options.MaxBytes; nothing
	// was written.
	ErrFull = errors.New("file buffer is full")
	// ErrClosed: the log was closed.
	ErrClosed = errors.New("file buffer is closed")
	// ErrTooLarge: a record is larger than MaxRecord.
	ErrTooLarge = errors.New("file buffer record too large")
	// ErrInUse: another process holds the directory. Two processes
	// replaying and deleting the same files would each see the other's
	// records as their own.
	ErrInUse = errors.New("file buffer directory is in use by another process")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Options configure a Log; zero fields take their defaults.
type Options struct {
	// EventsPerFile rotates the current file after this many records.
	EventsPerFile int
	// FileBytes rotates the current file once it holds this many bytes.
	FileBytes int64
	// MaxBytes caps the bytes of all files together; an Append past it
	// fails with ErrFull.
	MaxBytes int64
}

// File is one file of the log, as Files lists it.
type File struct {
	Seq     uint64
	Records int
	Bytes   int64
	// Since is when its first record was written (for a file found at
	// Open, its modification time: its last write).
	Since time.Time
}

// Stats describe the log.
type Stats struct {
	Records int64 // records in the files not yet removed
	Bytes   int64
	Files   int
	Oldest  time.Time // Since of the oldest file; zero when empty
	// Cut is the bytes Open removed from torn file tails.
	Cut int64
	// Healthy is false once a write failed in a way that left the current
	// file unusable; every Append then fails until the process restarts.
	Healthy bool
}

// Log is an open buffer directory. Its methods are safe for concurrent use.
type Log struct {
	dir  string
	opts Options
	lock *os.File // holds the flock on LockName while the log is open

	wmu sync.Mutex // held by the one writer, and by Seal; taken before mu

	mu       sync.Mutex // guards everything below
	files    []File     // oldest first; the last is the current file when cur != nil
	cur      *os.File
	reserved int64 // bytes of appends queued but not yet written
	queue    []*appendReq
	writing  bool // an append is writing; the queued ones wait for it
	broken   error
	closed   bool
	cut      int64
	nextSeq  uint64
}

type appendReq struct {
	recs [][]byte
	size int64
	done chan error
}

// Open opens dir (creating it), cuts torn tails and returns the log. New
// records go to a fresh file, after the ones found.
func Open(dir string, opts Options) (*Log, error) {
	if opts.EventsPerFile <= 0 {
		opts.EventsPerFile = EventsPerFileDefault
	}
	if opts.FileBytes <= 0 {
		opts.FileBytes = FileBytesDefault
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = MaxBytesDefault
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("error creating the file buffer directory: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	l, err := open(dir, opts, lock)
	if err != nil {
		_ = lock.Close()
		return nil, err
	}
	return l, nil
}

// LockName is the file of a buffer directory that the process holding the
// directory keeps an exclusive flock on; the kernel drops it when the
// process dies, so a crash leaves nothing to clean up.
const LockName = "LOCK"

func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, LockName), os.O_CREATE|os.O_RDWR, 0o640)
	if err != nil {
		return nil, fmt.Errorf("error opening the file buffer lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrInUse, dir)
		}
		return nil, fmt.Errorf("error locking the file buffer directory: %w", err)
	}
	return f, nil
}

// open reads the locked directory dir.
func open(dir string, opts Options, lock *os.File) (*Log, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("error listing the file buffer directory: %w", err)
	}
	l := &Log{dir: dir, opts: opts, lock: lock, nextSeq: 1}
	for _, e := range entries {
		seq, ok := parseName(e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		f, cut, err := l.check(seq)
		if err != nil {
			return nil, err
		}
		l.cut += cut
		l.nextSeq = max(l.nextSeq, seq+1)
		if f.Records == 0 {
			// Nothing acknowledged is in it: a file created just before a
			// crash, or one whose only record was torn.
			if err := os.Remove(l.path(seq)); err != nil {
				return nil, fmt.Errorf("error removing an empty buffer file: %w", err)
			}
			continue
		}
		l.files = append(l.files, f)
	}
	slices.SortFunc(l.files, func(a, b File) int { return cmp.Compare(a.Seq, b.Seq) })
	return l, nil
}

func (l *Log) path(seq uint64) string {
	return filepath.Join(l.dir, fmt.Sprintf("%020d%s", seq, suffix))
}

// parseName reads the sequence number of a log file's name.
func parseName(name string) (uint64, bool) {
	base, ok := strings.CutSuffix(name, suffix)
	if !ok || len(base) != 20 {
		return 0, false
	}
	seq, err := strconv.ParseUint(base, 10, 64)
	return seq, err == nil
}

// check scans file seq and truncates it after its last whole record.
func (l *Log) check(seq uint64) (File, int64, error) {
	p := l.path(seq)
	fh, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		return File{}, 0, fmt.Errorf("error opening a buffer file: %w", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return File{}, 0, fmt.Errorf("error reading a buffer file: %w", err)
	}
	data, err := io.ReadAll(fh)
	if err != nil {
		return File{}, 0, fmt.Errorf("error reading a buffer file: %w", err)
	}
	recs, good := Decode(data)
	f := File{Seq: seq, Records: len(recs), Bytes: int64(good), Since: st.ModTime()}
	cut := int64(len(data) - good)
	if cut > 0 {
		if err := fh.Truncate(int64(good)); err != nil {
			return File{}, 0, fmt.Errorf("error cutting a torn buffer file: %w", err)
		}
		if err := fh.Sync(); err != nil {
			return File{}, 0, fmt.Errorf("error cutting a torn buffer file: %w", err)
		}
	}
	return f, cut, nil
}

// Encode appends one record (header and payload) to dst.
func Encode(dst, payload []byte) []byte {
	var h [headerSize]byte
	binary.LittleEndian.PutUint32(h[:4], uint32(len(payload)))
	c := crc32.Update(0, castagnoli, h[:4])
	c = crc32.Update(c, castagnoli, payload)
	binary.LittleEndian.PutUint32(h[4:], c)
	dst = append(dst, h[:]...)
	return append(dst, payload...)
}

// Decode reads the records of data up to the first that is incomplete or
// fails its checksum, and returns them (sub-slices of data) with the number
// of bytes they take.
func Decode(data []byte) (recs [][]byte, good int) {
	for {
		rest := data[good:]
		if len(rest) < headerSize {
			return recs, good
		}
		n := binary.LittleEndian.Uint32(rest[:4])
		if n > MaxRecord || uint64(len(rest)-headerSize) < uint64(n) {
			return recs, good
		}
		payload := rest[headerSize : headerSize+int(n)]
		c := crc32.Update(0, castagnoli, rest[:4])
		c = crc32.Update(c, castagnoli, payload)
		if c != binary.LittleEndian.Uint32(rest[4:8]) {
			return recs, good
		}
		recs = append(recs, payload)
		good += headerSize + int(n)
	}
}

// Append writes the records durably, in order and next to each other in the
// log, and returns once they are fsynced. It fails with ErrFull, and writes
// nothing, when they would take the log past MaxBytes.
func (l *Log) Append(recs [][]byte) error {
	var size int64
	for _, r := range recs {
		if len(r) > MaxRecord {
			return ErrTooLarge
		}
		size += headerSize + int64(len(r))
	}
	l.mu.Lock()
	switch {
	case l.closed:
		l.mu.Unlock()
		return ErrClosed
	case l.broken != nil:
		l.mu.Unlock()
		return l.broken
	case l.bytesLocked()+l.reserved+size > l.opts.MaxBytes:
		l.mu.Unlock()
		return ErrFull
	}
	req := &appendReq{recs: recs, size: size, done: make(chan error, 1)}
	l.reserved += size
	l.queue = append(l.queue, req)
	if l.writing {
		// The append being written takes this one in its next round.
		l.mu.Unlock()
		return <-req.done
	}
	// This append leads: it writes every queued append, round after round,
	// until none is left.
	l.writing = true
	l.mu.Unlock()
	l.wmu.Lock()
	l.mu.Lock()
	for len(l.queue) > 0 {
		batch := l.queue
		l.queue = nil
		l.mu.Unlock()
		err := l.write(batch)
		l.mu.Lock()
		for _, r := range batch {
			l.reserved -= r.size
			r.done <- err
		}
	}
	l.writing = false
	l.mu.Unlock()
	l.wmu.Unlock()
	return <-req.done
}

func (l *Log) bytesLocked() int64 {
	var n int64
	for _, f := range l.files {
		n += f.Bytes
	}
	return n
}

// written is what one write added to one file.
type written struct {
	seq     uint64
	records int
	bytes   int64
}

// write appends the batch to the current file, rotating as needed, fsyncs,
// and only then counts the records in l.files. The caller holds l.wmu.
func (l *Log) write(batch []*appendReq) error {
	l.mu.Lock()
	if l.broken != nil {
		// An earlier round of this writer failed.
		defer l.mu.Unlock()
		return l.broken
	}
	var cur written
	if l.cur != nil {
		f := l.files[len(l.files)-1]
		cur = written{seq: f.Seq, records: f.Records, bytes: f.Bytes}
	}
	start, had := cur, l.cur != nil // the current file as the batch found it
	l.mu.Unlock()
	var (
		buf   []byte
		added []written // per file touched, in order; the last is the current one
		ended []*os.File
	)
	fail := func(err error) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, f := range ended {
			f.Close()
		}
		l.brokenLocked(err)
		// Every append of the batch is answered with the error, so no
		// record of it may stay to be replayed (a pusher that sends it again
		// would have it twice): cut the file it started in back to where it
		// was, and drop the files it started.
		first := 0
		if had {
			_ = os.Truncate(l.path(start.seq), start.bytes)
			first = 1
		}
		for _, a := range added[min(first, len(added)):] {
			_ = os.Remove(l.path(a.seq))
			l.files = slices.DeleteFunc(l.files, func(f File) bool { return f.Seq == a.seq })
		}
		return l.broken
	}
	if l.cur != nil {
		added = append(added, written{seq: cur.seq})
	}
	for _, r := range batch {
		for _, rec := range r.recs {
			n := int64(headerSize + len(rec))
			if l.cur == nil || cur.records >= l.opts.EventsPerFile || (cur.records > 0 && cur.bytes+n > l.opts.FileBytes) {
				if len(buf) > 0 {
					if _, err := l.cur.Write(buf); err != nil {
						return fail(err)
					}
					buf = buf[:0]
				}
				if l.cur != nil {
					ended = append(ended, l.cur)
				}
				seq, err := l.rotate()
				if err != nil {
					return fail(err)
				}
				cur = written{seq: seq}
				added = append(added, written{seq: seq})
			}
			buf = Encode(buf, rec)
			cur.records++
			cur.bytes += n
			a := &added[len(added)-1]
			a.records++
			a.bytes += n
		}
	}
	if len(buf) > 0 {
		if _, err := l.cur.Write(buf); err != nil {
			return fail(err)
		}
	}
	for _, f := range append(ended, l.cur) {
		if err := f.Sync(); err != nil {
			return fail(err)
		}
	}
	for _, f := range ended {
		f.Close()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range added {
		// A file replayed and removed meanwhile is gone from the list.
		if i := slices.IndexFunc(l.files, func(f File) bool { return f.Seq == a.seq }); i >= 0 {
			l.files[i].Records += a.records
			l.files[i].Bytes += a.bytes
		}
	}
	return nil
}

// rotate starts a new current file, makes its name durable and returns its
// sequence number. The caller holds l.wmu.
func (l *Log) rotate() (uint64, error) {
	l.mu.Lock()
	seq := l.nextSeq
	l.nextSeq++
	l.mu.Unlock()
	fh, err := os.OpenFile(l.path(seq), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o640)
	if err != nil {
		return 0, err
	}
	if err := syncDir(l.dir); err != nil {
		fh.Close()
		return 0, err
	}
	l.mu.Lock()
	l.cur = fh
	l.files = append(l.files, File{Seq: seq, Since: time.Now()})
	l.mu.Unlock()
	return seq, nil
}

// brokenLocked records a failed write. What was written of the batch is
// not acknowledged; the current file is closed so that nothing is appended
// after a record that may be torn (Open cuts it at the next start).
func (l *Log) brokenLocked(err error) {
	l.broken = fmt.Errorf("file buffer write failed: %w", err)
	if l.cur != nil {
		l.cur.Close()
		l.cur = nil
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Seal ends the current file, so that its records can be replayed (Files
// lists only ended files); the next Append starts a new one. It waits for a
// write in progress.
func (l *Log) Seal() {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur != nil {
		l.cur.Close()
		l.cur = nil
	}
}

// Files lists the ended files, oldest first.
func (l *Log) Files() []File {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.files)
	if l.cur != nil {
		n--
	}
	return slices.Clone(l.files[:n])
}

// Read returns the records of an ended file, in order.
func (l *Log) Read(f File) ([][]byte, error) {
	data, err := os.ReadFile(l.path(f.Seq))
	if err != nil {
		return nil, fmt.Errorf("error reading a buffer file: %w", err)
	}
	recs, _ := Decode(data)
	return recs, nil
}

// Remove deletes an ended file: its records are stored elsewhere. The
// current file cannot be removed (Seal it first).
func (l *Log) Remove(f File) error {
	l.mu.Lock()
	if l.cur != nil && l.files[len(l.files)-1].Seq == f.Seq {
		l.mu.Unlock()
		return fmt.Errorf("error removing buffer file %d: it is being written", f.Seq)
	}
	l.mu.Unlock()
	if err := os.Remove(l.path(f.Seq)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("error removing a replayed buffer file: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.files = slices.DeleteFunc(l.files, func(x File) bool { return x.Seq == f.Seq })
	return nil
}

// Stats reports the log's size and health.
func (l *Log) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := Stats{Files: len(l.files), Cut: l.cut, Healthy: l.broken == nil && !l.closed}
	for _, f := range l.files {
		s.Records += int64(f.Records)
		s.Bytes += f.Bytes
	}
	if len(l.files) > 0 && l.files[0].Records > 0 {
		s.Oldest = l.files[0].Since
	}
	return s
}

// Close ends the current file and releases the directory; later Appends
// fail with ErrClosed. Every acknowledged record is already durable.
func (l *Log) Close() error {
	l.Seal()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	return l.lock.Close()
}
