package actors

import (
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/queengo/queengo"
)

// The buckets of the actors' histograms, Prometheus' kind (le): seconds
// from half a millisecond (a claim round or commit on an idle box) to 30 s
// (past a request's timeout); sizes (messages, pops or items per batch) up
// to a batch's 10,000.
var (
	secondsBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	sizeBuckets    = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000}
)

// brokerMetrics are a Broker's figures, registered in its Config.Metrics
// set and served with the rest on /metrics/prometheus.
type brokerMetrics struct {
	commitMessages *metrics.PrometheusHistogram
	commitDuration *metrics.PrometheusHistogram
	commitClaims   *metrics.Counter
	claimRoundPops *metrics.PrometheusHistogram
	claimDuration  *metrics.PrometheusHistogram
	handOffItems   *metrics.PrometheusHistogram
	// ackCommitItems is the number of items each ack commit carried, lease
	// extensions included (ackCoalescer).
	ackCommitItems *metrics.PrometheusHistogram
	parkRefused    *metrics.Counter
	// popsCancelled counts the pops whose client left before reading their
	// answer (parked, waiting for a round, or in one), or that Broker.Pop
	// stopped waiting for; popsAbandoned those of them whose claim had taken
	// messages (abandon.go).
	popsCancelled *metrics.Counter
	popsAbandoned *metrics.Counter
	// lostLeasesEnded counts the leases of claims whose answer was lost
	// that the Broker ended (lost.go).
	lostLeasesEnded   *metrics.Counter
	actorRestarts     *metrics.Counter
	actorPassivations *metrics.Counter
	// parked counts every long poll the Broker keeps parked, discovery
	// scopes' included (queengo_parked_pops).
	parked atomic.Int64
	// backoff counts the parking lots' keys in back-off (BackoffStats).
	backoff backoffCounts
}

// backoffCounts add up the keys of every parking lot of a Broker whose
// re-check interval grew past Backoff.Initial (parkingLot.intervalMoved):
// the (lot, group) pairs with one, the queue lots with one, the keys and
// the sum of their intervals in nanoseconds.
type backoffCounts struct {
	groups, queues, keys, interval atomic.Int64
}

// BackoffStats reports the Broker's long polls in back-off now
// (queen_queue_backoff_*). The counts are kept by the parking lots as
// their keys' intervals change, so reading them costs four atomic loads.
// They are not read as one snapshot: the interval sum is read before the
// key count, and the lots add a key before its interval and take its
// interval off before the key, so a read racing a change can only
// understate the average, never pass Backoff.Max.
func (b *Broker) BackoffStats() queengo.BackoffStats {
	c := &b.metrics.backoff
	sum := c.interval.Load()
	st := queengo.BackoffStats{Keys: c.keys.Load(), Groups: c.groups.Load(), Queues: c.queues.Load()}
	if st.Keys > 0 {
		st.AvgInterval = time.Duration(max(sum, 0) / st.Keys)
	}
	return st
}

func newBrokerMetrics(set *metrics.Set) *brokerMetrics {
	m := &brokerMetrics{
		commitMessages:    set.NewPrometheusHistogramExt(`queengo_commit_messages`, sizeBuckets),
		commitDuration:    set.NewPrometheusHistogramExt(`queengo_commit_duration_seconds`, secondsBuckets),
		commitClaims:      set.NewCounter(`queengo_commit_claim_rounds_total`),
		claimRoundPops:    set.NewPrometheusHistogramExt(`queengo_claim_round_pops`, sizeBuckets),
		claimDuration:     set.NewPrometheusHistogramExt(`queengo_claim_duration_seconds`, secondsBuckets),
		handOffItems:      set.NewPrometheusHistogramExt(`queengo_ack_handoff_items`, sizeBuckets),
		ackCommitItems:    set.NewPrometheusHistogramExt(`queengo_ack_commit_items`, sizeBuckets),
		parkRefused:       set.NewCounter(`queengo_parked_pops_refused_total`),
		popsCancelled:     set.NewCounter(`queengo_pops_cancelled_total`),
		popsAbandoned:     set.NewCounter(`queengo_pops_abandoned_total`),
		lostLeasesEnded:   set.NewCounter(`queengo_lost_leases_ended_total`),
		actorRestarts:     set.NewCounter(`queengo_actor_restarts_total`),
		actorPassivations: set.NewCounter(`queengo_actor_passivations_total`),
	}
	set.NewGauge(`queengo_parked_pops`, func() float64 { return float64(m.parked.Load()) })
	return m
}
