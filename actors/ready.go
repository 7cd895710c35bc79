package actors

import (
	"maps"
	"time"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

const (
	// fullScanEvery bounds how stale a ready set may get: at least this
	// often a claim searches every partition of the queue, which also finds
	// work the hints missed (another process's pushes, acks or expiries).
	fullScanEvery = time.Second
	// emptyRescan is the shortest gap between two full scans while the ready
	// set says nothing is claimable; pops in between answer from the set.
	emptyRescan = 200 * time.Millisecond
	// candidatesMin and candidatesMax bound the part of the ready set one
	// claim searches.
	candidatesMin = 4
	candidatesMax = 64
	// readyReportMax is the most untaken partitions a claim reports
	// (queen.claim LIMIT): a full scan that reports fewer saw everything
	// claimable.
	readyReportMax = 1000
	// readyOrderSlack is how many stale entries a ready set's order may
	// hold beyond twice its partitions before it is compacted.
	readyOrderSlack = 64
)

// readySet is a queue actor's belief about which partitions one consumer
// group could claim now. It is a hint: a claim verifies everything in SQL.
// Each entry remembers the event number of its last offer, so a claim that
// started before a partition was offered again cannot erase that offer when
// it comes back empty-handed, and of its first since it became ready, which
// orders the claims: the partition ready longest goes first.
type readySet struct {
	set map[uuid.UUID]readyMark
	// order lists the set's partitions by first offer, oldest first; an
	// entry whose partition left the set, or came back with a later first
	// offer, is stale and skipped (trimmed at the head, compacted when
	// stale entries make up most of it).
	order    []readyEntry
	next     int       // where in order the round being built takes its next candidates
	known    bool      // the last full scan saw everything claimable
	lastFull time.Time // when a claim last searched every partition
}

// readyMark holds the event numbers of a ready partition's first and last
// offers.
type readyMark struct{ first, last uint64 }

// readyEntry is a partition in a readySet's order, with its first offer.
type readyEntry struct {
	pid   uuid.UUID
	first uint64
}

func newReadySet() *readySet { return &readySet{set: map[uuid.UUID]readyMark{}} }

// offer marks pid ready as of event n; one already ready keeps its place.
func (rs *readySet) offer(pid uuid.UUID, n uint64) {
	if m, ok := rs.set[pid]; ok {
		m.last = n
		rs.set[pid] = m
		return
	}
	rs.set[pid] = readyMark{first: n, last: n}
	rs.order = append(rs.order, readyEntry{pid: pid, first: n})
}

// drop forgets pid unless it was offered after event since.
func (rs *readySet) drop(pid uuid.UUID, since uint64) {
	if m, ok := rs.set[pid]; ok && m.last <= since {
		delete(rs.set, pid)
		rs.tidy()
	}
}

// live reports whether e is the current entry of its partition.
func (rs *readySet) live(e readyEntry) bool {
	m, ok := rs.set[e.pid]
	return ok && m.first == e.first
}

// tidy trims stale entries off the head of order, and compacts it when
// stale entries make up most of it, so that order stays O(len(set)) and a
// walk from the head finds live entries at once.
func (rs *readySet) tidy() {
	n := 0
	for n < len(rs.order) && !rs.live(rs.order[n]) {
		n++
	}
	if n > 0 {
		rs.order = rs.order[n:]
	}
	if len(rs.order) > 2*len(rs.set)+readyOrderSlack {
		live := make([]readyEntry, 0, len(rs.set))
		for _, e := range rs.order {
			if rs.live(e) {
				live = append(live, e)
			}
		}
		rs.order = live
	}
}

// take returns k of the set's partitions in ready order, starting where the
// round's previous take stopped (wrapping around when the round asks for
// more than the set holds), so that the pops of one round search different
// partitions, the longest ready first. Nothing leaves the set while a round
// is built, so next stays a valid place in order.
func (rs *readySet) take(k int) []uuid.UUID {
	k = min(k, len(rs.set))
	out := make([]uuid.UUID, 0, k)
	for wrapped := false; len(out) < k; {
		if rs.next >= len(rs.order) {
			if wrapped {
				break
			}
			rs.next, wrapped = 0, true
			continue
		}
		if e := rs.order[rs.next]; rs.live(e) {
			out = append(out, e.pid)
		}
		rs.next++
	}
	return out
}

// readySets are the ready sets of one queue, one per consumer group that
// popped from it, and the lease expiries its own claims set.
type readySets struct {
	groups map[string]*readySet
	events uint64 // numbers the offers
	// leases holds, per (group, partition), the end of the latest lease this
	// actor's claims took; leaseHeap orders those ends (a later lease of the
	// same partition supersedes the earlier one).
	leases    map[leaseKey]time.Time
	leaseHeap endHeap[leaseKey]
}

// leaseKey names the lease of one group on one partition.
type leaseKey struct {
	group string
	pid   uuid.UUID
}

func newReadySets() readySets {
	return readySets{groups: map[string]*readySet{}, leases: map[leaseKey]time.Time{}}
}

// leased records a lease of group on pid that ends at at.
func (r *readySets) leased(group string, pid uuid.UUID, at time.Time) {
	k := leaseKey{group: group, pid: pid}
	r.leases[k] = at
	r.leaseHeap.add(at, k, len(r.leases), maps.All(r.leases))
}

// since is the current event number: a claim remembers it when it starts.
func (r *readySets) since() uint64 { return r.events }

// offer marks pid ready for group, or for every group when group is empty
// (a commit: everyone may claim it).
func (r *readySets) offer(pid uuid.UUID, group string) {
	for g, rs := range r.groups {
		if group == "" || group == g {
			r.events++
			rs.offer(pid, r.events)
		}
	}
}

// unknown tells group's set that a partition it cannot name may be ready:
// the group's next claim searches every partition.
func (r *readySets) unknown(group string) {
	if rs := r.groups[group]; rs != nil {
		rs.known = false
	}
}

// roundStarts tells the sets that the actor builds a new round: the
// candidates of its claims start again from the longest ready partitions.
func (r *readySets) roundStarts() {
	for _, rs := range r.groups {
		rs.next = 0
	}
}

// candidates picks the partitions a claim of group searches: nil for all of
// them (no set yet, or the last full scan is older than fullScanEvery, or the
// set is empty and emptyRescan passed), else enough of the set for need
// partitions, the longest ready first, past those the round's earlier claims
// of the group were given. skip reports that the set is empty and a full
// scan ran too recently to repeat: the pop finds nothing without a claim.
func (r *readySets) candidates(group string, need int, now time.Time) (cands []uuid.UUID, skip bool) {
	rs := r.groups[group]
	switch {
	case rs == nil || !rs.known || now.Sub(rs.lastFull) > fullScanEvery:
		return nil, false
	case len(rs.set) == 0:
		return nil, now.Sub(rs.lastFull) < emptyRescan
	}
	// A claim costs what it searches, so it gets only part of the set:
	// enough partitions for its need, with slack for the ones concurrent
	// pops take first. In ready order: a random sample (map order) let a
	// partition wait many pop cycles at partitions=1 while others were
	// visited again, which made delivery p99 several times the p50.
	return rs.take(min(max(2*need, candidatesMin), candidatesMax)), false
}

// learn updates the claim's group's set from what the claim, which started
// at event since, saw: partitions it leased are not ready until their lease
// ends, the ones it reported claimable are, and the rest of what it searched
// is not (unless offered again since the claim started).
func (r *readySets) learn(p *queengo.ClaimParams, res *queengo.ClaimResult, since uint64, now time.Time) {
	rs := r.groups[p.Group]
	if rs == nil {
		rs = newReadySet()
		r.groups[p.Group] = rs
	}
	keep := make(map[uuid.UUID]bool, len(res.Ready)+len(res.Spans))
	for _, pid := range res.Ready {
		keep[pid] = true
		r.events++
		rs.offer(pid, r.events)
	}
	if p.Min == 0 || len(res.Messages) > 0 {
		for _, s := range res.Spans {
			keep[s.PartitionID] = true
			if p.AutoAck {
				// Committed, not leased: it may hold more.
				r.events++
				rs.offer(s.PartitionID, r.events)
			} else {
				rs.drop(s.PartitionID, since)
				r.leased(p.Group, s.PartitionID, now.Add(s.Lease))
			}
		}
	}
	searched := p.Candidates
	if searched == nil {
		for pid := range rs.set {
			searched = append(searched, pid)
		}
		rs.known, rs.lastFull = len(res.Ready) < readyReportMax, now
	}
	for _, pid := range searched {
		if !keep[pid] {
			rs.drop(pid, since)
		}
	}
}

// expire offers again, to their group, the partitions whose lease ended by
// now, and appends those groups to out.
func (r *readySets) expire(now time.Time, out []string) []string {
	for e, ok := r.leaseHeap.take(now); ok; e, ok = r.leaseHeap.take(now) {
		if at, ok := r.leases[e.key]; !ok || !at.Equal(e.at) {
			continue // superseded by a later lease of the partition
		}
		delete(r.leases, e.key)
		if rs := r.groups[e.key.group]; rs != nil {
			r.events++
			rs.offer(e.key.pid, r.events)
		}
		out = append(out, e.key.group)
	}
	return out
}

// next is the earliest lease expiry; zero when none. It may be the end of
// a superseded lease: expire then finds nothing due and next moves on.
func (r *readySets) next() time.Time { return r.leaseHeap.next() }

// reset forgets everything: the queue was deleted.
func (r *readySets) reset() {
	r.groups = map[string]*readySet{}
	r.leases = map[leaseKey]time.Time{}
	r.leaseHeap = nil
}
