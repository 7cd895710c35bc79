// Package resourcetest holds the black-box HTTP tests of the resource routes
// (docs/api-admin.md "Resources", including the routes the SDKs call that the reference lacks: the
// partition list and the queue clear): overview, queues, one queue,
// namespaces, tasks, partitions, their figures, filters, pagination and
// errors.
//
// Every test shares one lazily started broker on the package database. The
// overview is broker-wide, so its test runs alone (not in parallel) and
// compares the figures before and after its own work.
package resourcetest

import (
	"net/url"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

func TestMain(m *testing.M) { e2e.Main(m, "resource") }

func shared(t testing.TB) *e2e.Server {
	t.Helper()
	return e2e.Shared(t, "DB_POOL_SIZE=8")
}

type counts struct {
	Total      int64 `json:"total"`
	Pending    int64 `json:"pending"`
	Processing int64 `json:"processing"`
	Completed  int64 `json:"completed"`
	Failed     int64 `json:"failed"`
	DeadLetter int64 `json:"deadLetter"`
}

type pagination struct {
	Limit  int `json:"limit"`
	Offset int `json:"offset"`
}

type queueEntry struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Namespace  string `json:"namespace"`
	Task       string `json:"task"`
	CreatedAt  string `json:"createdAt"`
	Partitions int    `json:"partitions"`
	Messages   counts `json:"messages"`
}

type queueList struct {
	Queues     []queueEntry `json:"queues"`
	Total      int          `json:"total"`
	Pagination pagination   `json:"pagination"`
}

type partitionEntry struct {
	ID            string  `json:"id"`
	Name          string  `json:"name"`
	Queue         string  `json:"queue"`
	CreatedAt     string  `json:"createdAt"`
	Head          int64   `json:"head"`
	Messages      counts  `json:"messages"`
	Stats         counts  `json:"stats"`
	OldestMessage *string `json:"oldestMessage"`
	NewestMessage *string `json:"newestMessage"`
	LastWriteAt   *string `json:"lastWriteAt"`
}

type queueDetail struct {
	ID                  string           `json:"id"`
	Name                string           `json:"name"`
	Namespace           string           `json:"namespace"`
	Task                string           `json:"task"`
	CreatedAt           string           `json:"createdAt"`
	Options             map[string]any   `json:"options"`
	Partitions          []partitionEntry `json:"partitions"`
	PartitionCount      int              `json:"partitionCount"`
	PartitionPagination pagination       `json:"partitionPagination"`
	Totals              counts           `json:"totals"`
}

// get requires a 200 answer to GET path and decodes it into v.
func get(t testing.TB, s *e2e.Server, path string, v any) {
	t.Helper()
	r := s.Get(t, path)
	if r.Status != 200 {
		t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
	}
	r.JSON(t, v)
}

// getFresh reads path after a stats refresh (e2e.Server.RefreshStats).
func getFresh(t testing.TB, s *e2e.Server, path string, v any) {
	t.Helper()
	s.RefreshStats(t)
	get(t, s, path, v)
}

func getQueue(t testing.TB, s *e2e.Server, name string, pairs ...string) queueDetail {
	t.Helper()
	var d queueDetail
	get(t, s, "/api/v1/resources/queues/"+url.PathEscape(name)+e2e.Query(pairs...), &d)
	return d
}

func parseTS(t testing.TB, s string) time.Time {
	t.Helper()
	ts, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("timestamp %q: %v", s, err)
	}
	return ts
}
