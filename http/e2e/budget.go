package e2e

import (
	"context"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/semaphore"
)

// connBudget bounds the PostgreSQL connections the brokers of one test
// process may hold at once. A package's tests run in parallel (64 at a
// time) and each starts brokers of its own; unbounded, one package reached
// 56 of the server's 100 connections alone, and with anything else on the
// server (another package's leftovers, a developer's broker) the next
// broker failed with "too many clients". A broker takes its pool size plus
// two (the LISTEN connection and the leader or migration connection) from
// the budget when it starts and gives them back when it stops.
var connBudget = semaphore.NewWeighted(budgetSize)

// budgetSize is QUEENGO_TEST_BROKER_CONNS, else 64. Brokers hold fewer
// connections than their pools allow (poptest's peak under 64 was 45
// held), which leaves the shared server's other 60 to the tests' own
// connections and to whoever else uses it.
var budgetSize = func() int64 {
	if n, err := strconv.ParseInt(os.Getenv("QUEENGO_TEST_BROKER_CONNS"), 10, 64); err == nil && n > 0 {
		return n
	}
	return 64
}()

// budgetWait is how long a broker waits for its share before it starts
// anyway: a test that holds one broker and starts a second must not wait
// forever on tests doing the same.
const budgetWait = 90 * time.Second

// reserveConns takes a broker's share of the budget (its DB_POOL_SIZE in
// env, else the harness's 6, plus two) and returns the function that gives
// it back.
func reserveConns(env []string) func() {
	pool := int64(6)
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "DB_POOL_SIZE="); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
				pool = n
			}
		}
	}
	w := min(pool+2, budgetSize)
	ctx, cancel := context.WithTimeout(context.Background(), budgetWait)
	defer cancel()
	if connBudget.Acquire(ctx, w) != nil {
		return func() {}
	}
	return func() { connBudget.Release(w) }
}
