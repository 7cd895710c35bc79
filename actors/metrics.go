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

// Actor-side metrics, exported with the rest on /metrics/prometheus.
var (
	commitMessages = metrics.NewPrometheusHistogramExt(`queengo_commit_messages`, sizeBuckets)
	commitDuration = metrics.NewPrometheusHistogramExt(`queengo_commit_duration_seconds`, secondsBuckets)
	commitClaims   = metrics.NewCounter(`queengo_commit_claim_rounds_total`)
	claimRoundPops = metrics.NewPrometheusHistogramExt(`queengo_claim_round_pops`, sizeBuckets)
	claimDuration  = metrics.NewPrometheusHistogramExt(`queengo_claim_duration_seconds`, secondsBuckets)
	handOffItems   = metrics.NewPrometheusHistogramExt(`queengo_ack_handoff_items`, sizeBuckets)
	parkRefused    = metrics.NewCounter(`queengo_parked_pops_refused_total`)
	// popsCancelled counts the pops whose client left before reading their
	// answer (parked, waiting for a round, or in one), or that Broker.Pop
	// stopped waiting for; popsAbandoned those of them whose claim had taken
	// messages (abandon.go).
	popsCancelled = metrics.NewCounter(`queengo_pops_cancelled_total`)
	popsAbandoned = metrics.NewCounter(`queengo_pops_abandoned_total`)
	// lostLeasesEnded counts the leases of claims whose answer was lost
	// that the Broker ended (lost.go).
	lostLeasesEnded   = metrics.NewCounter(`queengo_lost_leases_ended_total`)
	actorRestarts     = metrics.NewCounter(`queengo_actor_restarts_total`)
	actorPassivations = metrics.NewCounter(`queengo_actor_passivations_total`)
	parked            atomic.Int64
	_                 = metrics.NewGauge(`queengo_parked_pops`, func() float64 { return float64(parked.Load()) })
)
