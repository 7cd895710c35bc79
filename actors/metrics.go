package actors

import (
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"
)

// Actor-side metrics, exported with the rest on /metrics/prometheus.
var (
	commitMessages = metrics.NewHistogram(`queengo_commit_messages`)
	commitDuration = metrics.NewHistogram(`queengo_commit_duration_seconds`)
	commitClaims   = metrics.NewCounter(`queengo_commit_claim_rounds_total`)
	claimRoundPops = metrics.NewHistogram(`queengo_claim_round_pops`)
	claimDuration  = metrics.NewHistogram(`queengo_claim_duration_seconds`)
	handOffItems   = metrics.NewHistogram(`queengo_ack_handoff_items`)
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
