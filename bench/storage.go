package main

import (
	"bufio"
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/queengo/queengo/http/client"
)

// StorageParams configures the storage-format measurement.
type StorageParams struct {
	Segments     int  // segments inserted per format
	Frames       int  // frames (messages) per segment
	PayloadBytes int  // JSON payload per message
	ReadPasses   int  // timed full reads per format; the fastest counts
	Padded       bool // 'x'-padded payloads instead of realistic ones
}

// storageFormat is one way of storing a segment's frames.
type storageFormat struct {
	name    string // as reported
	colType string // bytea or jsonb
	storage string // column STORAGE clause, "" for the type's default
	encode  func(dst []byte, frames []storageFrame) []byte
}

// storageFrame is one message as a segment holds it: the fields queengo's
// frames carry besides offsets (message id, transaction id, payload).
type storageFrame struct {
	id      [16]byte
	txnID   string
	payload []byte
}

// storageFormats are the candidates. bytea-external is what queengo's
// queen.segments uses (length-prefixed binary frames, STORAGE EXTERNAL: no
// compression, so a pop reads the bytes without decompressing); bytea is
// the same frames with PostgreSQL's default compressible storage; jsonb is
// a JSON array of {id, transactionId, data} objects.
var storageFormats = []storageFormat{
	{"bytea-external", "bytea", "EXTERNAL", encodeFramesBinary},
	{"bytea", "bytea", "", encodeFramesBinary},
	{"jsonb", "jsonb", "", encodeFramesJSON},
}

// encodeFramesBinary writes frames as queengo's segment format does: flags
// byte, 16-byte message id, uvarint-prefixed transaction id, uvarint-prefixed
// payload.
func encodeFramesBinary(dst []byte, frames []storageFrame) []byte {
	for _, f := range frames {
		dst = append(dst, 0)
		dst = append(dst, f.id[:]...)
		dst = binary.AppendUvarint(dst, uint64(len(f.txnID)))
		dst = append(dst, f.txnID...)
		dst = binary.AppendUvarint(dst, uint64(len(f.payload)))
		dst = append(dst, f.payload...)
	}
	return dst
}

// encodeFramesJSON writes frames as a JSON array of objects.
func encodeFramesJSON(dst []byte, frames []storageFrame) []byte {
	dst = append(dst, '[')
	for i, f := range frames {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"id":"`...)
		dst = appendUUID(dst, f.id)
		dst = append(dst, `","transactionId":`...)
		dst = client.AppendJSONString(dst, f.txnID)
		dst = append(dst, `,"data":`...)
		dst = append(dst, f.payload...)
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

func appendUUID(dst []byte, id [16]byte) []byte {
	var b [36]byte
	hex.Encode(b[0:8], id[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], id[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], id[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], id[8:10])
	b[23] = '-'
	hex.Encode(b[24:], id[10:])
	return append(dst, b[:]...)
}

func cmdStorage(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("storage", flag.ContinueOnError)
	c := addCommon(fs)
	var p StorageParams
	fs.IntVar(&p.Segments, "segments", 2000, "segments inserted per format (one INSERT and commit each)")
	fs.IntVar(&p.Frames, "frames", 100, "frames (messages) per segment")
	fs.IntVar(&p.PayloadBytes, "payload", PayloadDefault, "JSON payload bytes per message")
	fs.IntVar(&p.ReadPasses, "read-passes", 3, "timed full reads per format (the fastest is reported)")
	fs.BoolVar(&p.Padded, "padded", false, "use the 'x'-padded payloads of the other scenarios (compress unrealistically well)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if p.Segments < 1 || p.Frames < 1 || p.ReadPasses < 1 {
		return fmt.Errorf("--segments, --frames and --read-passes must be positive")
	}
	if c.NoPG {
		return fmt.Errorf("storage needs PostgreSQL (drop --no-pg)")
	}
	env := newEnv(ctx, c, stdout)
	if env.PG == nil {
		return fmt.Errorf("storage needs psql and a reachable --pg-url")
	}
	results, err := runStorage(ctx, env, p)
	if len(results) > 0 {
		err = joinErr(err, env.finish(results...))
	}
	return err
}

// runStorage measures each storage format directly in PostgreSQL: it
// creates a scratch schema, inserts Segments segments of Frames frames per
// format with one INSERT (and one synchronous commit) per segment, as the
// broker appends segments, reads them all back with a binary COPY, as pgx
// reads with the binary protocol, and drops the schema. Insert time is
// psql's wall clock, CPU is all postgres processes' from /proc; the SQL is
// generated up front so that generating it is not measured.
func runStorage(ctx context.Context, env *Env, p StorageParams) ([]*Result, error) {
	schema := "bench_storage_" + env.Run
	dir, err := os.MkdirTemp("", "bench-storage-")
	if err != nil {
		return nil, fmt.Errorf("error creating temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	pg := &PG{URL: env.PG.URL, Schema: schema}
	if _, err := pg.Query(ctx, "CREATE SCHEMA "+quoteIdent(schema)); err != nil {
		return nil, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := pg.Query(cctx, "DROP SCHEMA "+quoteIdent(schema)+" CASCADE"); err != nil {
			fmt.Fprintf(env.Out, "warning: dropping scratch schema %s: %v\n", schema, err)
		}
	}()

	frames := make([][]storageFrame, p.Segments)
	payload := make([]byte, 0, p.PayloadBytes+32)
	rng := rand.New(rand.NewPCG(1, 2)) // fixed seed: the same data every run
	for s := range frames {
		frames[s] = make([]storageFrame, p.Frames)
		for f := range frames[s] {
			seq := int64(s*p.Frames + f)
			fr := &frames[s][f]
			_, _ = crand.Read(fr.id[:])
			fr.id[6] = fr.id[6]&0x0f | 0x70 // UUIDv7-shaped, like the broker's ids
			fr.txnID = env.Run + "-" + strconv.FormatInt(seq, 10)
			if p.Padded {
				payload = appendPayload(payload[:0], time.Now().UnixNano(), seq, p.PayloadBytes)
			} else {
				payload = appendRealisticPayload(payload[:0], time.Now().UnixNano(), seq, p.PayloadBytes, rng)
			}
			fr.payload = append([]byte(nil), payload...)
		}
	}

	var results []*Result
	for i, f := range storageFormats {
		if ctx.Err() != nil {
			break
		}
		table := fmt.Sprintf("%s.seg_%d", quoteIdent(schema), i)
		r, err := measureFormat(ctx, env, pg, dir, table, f, frames, p)
		if err != nil {
			return results, fmt.Errorf("error measuring %s: %w", f.name, err)
		}
		results = append(results, r)
	}
	return results, nil
}

func measureFormat(ctx context.Context, env *Env, pg *PG, dir, table string, f storageFormat,
	frames [][]storageFrame, p StorageParams) (*Result, error) {
	ddl := fmt.Sprintf(`CREATE TABLE %s (
  partition_id uuid NOT NULL, first_offset bigint NOT NULL, last_offset bigint NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(), frames %s NOT NULL,
  PRIMARY KEY (partition_id, first_offset))`, table, f.colType)
	if f.storage != "" {
		ddl += fmt.Sprintf("; ALTER TABLE %s ALTER COLUMN frames SET STORAGE %s", table, f.storage)
	}
	if _, err := pg.Query(ctx, ddl); err != nil {
		return nil, err
	}

	// The insert script: one statement per segment, autocommitted.
	insertPath := filepath.Join(dir, f.name+"-insert.sql")
	file, err := os.Create(insertPath)
	if err != nil {
		return nil, fmt.Errorf("error creating script: %w", err)
	}
	w := bufio.NewWriterSize(file, 1<<20)
	var enc, lit []byte
	partition := "0198f2c1-0000-7000-8000-000000000001"
	for s, seg := range frames {
		enc = f.encode(enc[:0], seg)
		lit = lit[:0]
		if f.colType == "bytea" {
			lit = append(lit, `'\x`...)
			lit = hex.AppendEncode(lit, enc)
			lit = append(lit, '\'')
		} else {
			lit = append(lit, quoteLiteral(string(enc))...)
		}
		first := s * p.Frames
		fmt.Fprintf(w, "INSERT INTO %s (partition_id, first_offset, last_offset, frames) VALUES ('%s', %d, %d, %s);\n",
			table, partition, first, first+len(seg)-1, lit)
	}
	if err := w.Flush(); err != nil {
		return nil, fmt.Errorf("error writing script: %w", err)
	}
	file.Close()
	readSQL := fmt.Sprintf(`\copy (SELECT frames FROM %s ORDER BY partition_id, first_offset) TO '/dev/null' WITH (FORMAT binary)`, table)

	msgs := int64(len(frames) * p.Frames)
	env.logf("storage %s: inserting %d segments x %d frames", f.name, len(frames), p.Frames)
	res := &Result{Scenario: "storage", Target: "postgres", StartedAt: time.Now().UTC(),
		Params: Params{Segments: len(frames), FramesPerSeg: p.Frames, PayloadBytes: p.PayloadBytes,
			Messages: msgs, Format: f.name}}
	sess, err := openPSQL(ctx, pg.URL)
	if err != nil {
		return nil, err
	}
	defer sess.Close()
	// A checkpoint first, so that no format's inserts pay for a checkpoint
	// (and the full-page writes after it) that an earlier format started.
	// It needs superuser or pg_checkpoint; without them the run goes on.
	if _, _, err := sess.Run("\\set ON_ERROR_STOP off\nCHECKPOINT;\n\\set ON_ERROR_STOP on"); err != nil {
		return nil, err
	}
	// CPU is the session backend's own, read from /proc while it lives;
	// WAL and table sizes come from the probe (which reads no broker).
	probe := StartProbe(ctx, &PG{URL: pg.URL, Schema: pg.Schema}, 0)
	cpu0, _ := sess.BackendCPU()
	_, took, err := sess.Run(`\i ` + insertPath)
	if err != nil {
		return nil, err
	}
	cpu1, _ := sess.BackendCPU()
	res.Seconds = took.Seconds()
	res.Messages = msgs
	res.MsgPerSec = float64(msgs) / took.Seconds()
	res.Resources = probe.Stop(ctx, msgs)
	res.Resources.PGCPUSeconds, res.Resources.PGCPUPerMillion = ptr(cpu1-cpu0), ptr((cpu1-cpu0)*1e6/float64(msgs))
	res.metric("insert_us_per_msg", took.Seconds()*1e6/float64(msgs))
	res.metric("insert_pg_cpu_us_per_msg", (cpu1-cpu0)*1e6/float64(msgs))
	res.metric("segment_bytes_encoded", float64(len(enc)))

	// Reads: one untimed warm-up, then ReadPasses timed ones: the fastest
	// wall time, and the backend CPU averaged over the passes (CPU is
	// counted in 10 ms ticks, so one pass alone is too coarse).
	if _, _, err := sess.Run(readSQL); err != nil {
		return nil, err
	}
	best := time.Duration(math.MaxInt64)
	c0, _ := sess.BackendCPU()
	for i := 0; i < p.ReadPasses; i++ {
		_, d, err := sess.Run(readSQL)
		if err != nil {
			return nil, err
		}
		best = min(best, d)
	}
	c1, _ := sess.BackendCPU()
	res.metric("read_us_per_msg", best.Seconds()*1e6/float64(msgs))
	res.metric("read_pg_cpu_us_per_msg", (c1-c0)/float64(p.ReadPasses)*1e6/float64(msgs))
	env.logf("storage %s: %.1f B/msg, insert %.2f µs/msg, read %.2f µs/msg", f.name,
		derefF(res.Resources.TableBytesPerMsg), res.Metrics["insert_us_per_msg"], res.Metrics["read_us_per_msg"])
	return res, nil
}

func derefF(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}
