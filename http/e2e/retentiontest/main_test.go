// Package retentiontest checks the data lifecycle black-box (D9, issue 10):
// segment retention, maxWaitTimeSeconds eviction, maxSize and idle-partition
// cleanup, against brokers started with short intervals, by what the API
// answers and how the database shrinks.
package retentiontest

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

func TestMain(m *testing.M) { e2e.Main(m, "retentiontest") }

// fastLifecycle runs retention and eviction every 200 ms, so a rule with a
// one-second limit shows within a couple of seconds.
var fastLifecycle = []string{"RETENTION_INTERVAL=200", "EVICTION_INTERVAL=200"}

func shared(t *testing.T) *e2e.Server {
	t.Helper()
	return e2e.Shared(t, fastLifecycle...)
}

// pushEach pushes n messages to queue/partition ("": Default), one request
// each, so each is a segment of its own; it returns their transaction ids.
func pushEach(t *testing.T, s *e2e.Server, queue, partition string, n int) []string {
	t.Helper()
	txs := make([]string, n)
	for i := range txs {
		txs[i] = s.PushN(t, queue, partition, 1)[0].Tx
	}
	return txs
}

// waitFor polls cond every 100 ms for at most d; its last error fails the
// test.
func waitFor(t *testing.T, d time.Duration, what string, cond func() error) {
	t.Helper()
	if err := e2e.Eventually(d, 100*time.Millisecond, cond); err != nil {
		t.Fatalf("%s: not within %v: %v", what, d, err)
	}
}

// deadLetters counts the dead letters of queue's group whose error starts
// with prefix.
func deadLetters(t *testing.T, queue, group, prefix string) int64 {
	t.Helper()
	return e2e.QueryInt(t, e2e.DB, `SELECT count(*) FROM queen.dead_letters d
JOIN queen.partitions p ON p.id = d.partition_id JOIN queen.queues q ON q.id = p.queue_id
WHERE q.name = $1 AND d.consumer_group = $2 AND d.error_message LIKE $3 || '%'`, queue, group, prefix)
}

// metric reads a counter or gauge of the broker's /metrics/prometheus (0
// when absent).
func metric(t *testing.T, s *e2e.Server, name string) float64 {
	t.Helper()
	r := s.Get(t, "/metrics/prometheus")
	if r.Status != 200 {
		t.Fatalf("metrics: %d", r.Status)
	}
	sc := bufio.NewScanner(bytes.NewReader(r.Body))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric %s: %q", name, v)
			}
			return f
		}
	}
	return 0
}
