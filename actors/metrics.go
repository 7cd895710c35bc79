package actors

import (
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"
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
