package pg

import (
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/queengo/queengo"
)

// Reading a claim round's take: the claim_take answers update the round's
// partitions and pops, and the segments they return are decoded into the
// pops' messages.

// readTakes reads the answers of a take's batch br: the statements that
// start it, the asyncCommit statement when async, then the calls'.
func (r *scopeRound) readTakes(br pgx.BatchResults, async bool, calls []*takeCall, out []queengo.ClaimResult) error {
	if err := r.sendPre(br); err != nil {
		return err
	}
	if async {
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	for _, call := range calls {
		if err := r.readTake(br, call, out); err != nil {
			return err
		}
	}
	return nil
}

// readTake reads one claim_take answer.
func (r *scopeRound) readTake(br pgx.BatchResults, call *takeCall, out []queengo.ClaimResult) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	g := &r.groups[call.group]
	if call.direct {
		g.entries = g.entries[:0]
	}
	locked, contact := make([]bool, len(call.pool)), []int(nil)
	var (
		ord, claim                  pgtype.Int4
		taken, from, leaseMS, first pgtype.Int8
		held, missing               pgtype.Bool
		pid                         pgtype.UUID
		pname, qname, created       pgtype.Text
		frames                      []byte
		dead                        []int64
		span                        *queengo.Span
		nLocked, lastLocked         int
	)
	for rows.Next() {
		if err := rows.Scan(&ord, &claim, &taken, &held, &pid, &pname, &qname, &from, &leaseMS, &first, &created, &frames, &dead, &missing); err != nil {
			return err
		}
		if !claim.Valid && !call.direct {
			// A partition of a pinned call's pool that the group never
			// contacted.
			if i := int(ord.Int32) - 1; missing.Bool && i >= 0 && i < len(call.pool) && !g.entries[call.pool[i]].contacted {
				g.entries[call.pool[i]].contacted = true
				g.missing = append(g.missing, pid.Bytes)
				contact = append(contact, i)
			}
			continue
		}
		if !claim.Valid {
			// A partition of a direct call's pool it did not lock.
			switch {
			case missing.Bool:
				// Contacted before the round ends and reported ready: the
				// next claim sees whether its seed left anything.
				g.missing = append(g.missing, pid.Bytes)
				g.entries = append(g.entries, roundEntry{pid: pid.Bytes})
			case nLocked == len(call.slots) && int(ord.Int32) > lastLocked:
				g.entries = append(g.entries, roundEntry{pid: pid.Bytes})
			}
			continue
		}
		if claim.Int32 < 1 || int(claim.Int32) > len(call.pops) || (!call.direct && (ord.Int32 < 1 || int(ord.Int32) > len(call.pool))) {
			return fmt.Errorf("claim_take answered for row %d of %d, pop %d of %d", ord.Int32, len(call.pool), claim.Int32, len(call.pops))
		}
		p := &r.pops[call.pops[claim.Int32-1]]
		res := &out[p.claim]
		if taken.Valid {
			// A locked row; its segments follow.
			span = nil
			nLocked, lastLocked = nLocked+1, int(ord.Int32)
			state := entryGone
			switch {
			case taken.Int64 == 0:
			case held.Bool:
				state = entryFree
				p.taken += int(taken.Int64)
				p.done = true
			default:
				state = entryTaken
				p.taken += int(taken.Int64)
				p.budget -= int(taken.Int64)
				p.parts++
				res.Spans = append(res.Spans, queengo.Span{PartitionID: pid.Bytes, Partition: pname.String, Queue: qname.String,
					From: from.Int64, To: from.Int64 + taken.Int64 - 1, Lease: time.Duration(leaseMS.Int64) * time.Millisecond})
				span = &res.Spans[len(res.Spans)-1]
				if r.claims[p.claim].AutoAck {
					r.committed = append(r.committed, autoSpan{claim: p.claim, pid: pid.Bytes, from: span.From, to: span.To})
				}
			}
			if call.direct {
				if state == entryFree {
					g.entries = append(g.entries, roundEntry{pid: pid.Bytes})
				}
			} else {
				locked[ord.Int32-1] = true
				g.entries[call.pool[ord.Int32-1]].state = state
			}
			continue
		}
		if span == nil || res.Err != nil {
			continue
		}
		// rows.Scan into []byte copies the value out of the read buffer, so
		// payloads may alias it after the next row is read.
		if err := decodeSegment(res, frames, r.keys, first.Int64, span.From, span.To, dead, created.String, span.PartitionID, span.Partition, span.Queue); err != nil {
			// The statement ran; only this pop's answer is unusable: its
			// leases expire and the messages are delivered again, or, for
			// autoAck, its spans are given back (giveBack).
			*res = queengo.ClaimResult{Err: fmt.Errorf("error reading claim: %w", err)}
		}
		frames = nil
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if call.direct {
		if len(g.missing) > 0 {
			// Its pops that got nothing look again once the cursors exist.
			for _, pi := range call.pops {
				if p := &r.pops[pi]; p.parts == 0 && p.taken == 0 {
					p.done = false
				}
			}
		}
		return nil
	}
	// Rows the call passed over were locked by a concurrent round or no
	// longer claimable; the ones after the last it locked, when it locked as
	// many as it had pops for, were not looked at and stay free.
	for i, e := range call.pool {
		switch {
		case locked[i]:
		case nLocked < len(call.slots) || i+1 < lastLocked:
			g.entries[e].state = entryGone
		default:
			g.entries[e].state = entryFree
		}
	}
	// A pinned pop whose partition gets its first contact looks again in
	// the next pass, whose batch makes the contact first.
	for _, i := range contact {
		g.entries[call.pool[i]].state = entryFree
		r.pops[call.pops[call.slots[i]-1]].done = false
	}
	return nil
}

// decodeSegment appends the frames of one segment that fall inside
// [from, to] and are not in dead (dead-lettered by the group, or deleted:
// claim_take lists both) to res.Messages, their sealed payloads opened with
// keys.
func decodeSegment(res *queengo.ClaimResult, b []byte, keys keyring, first, from, to int64, dead []int64, created string, pid uuid.UUID, pname, qname string) error {
	for off := first; len(b) > 0 && off <= to; off++ {
		var m queengo.Message
		var err error
		if b, err = decodeFrame(b, &m.Frame, keys); err != nil {
			return fmt.Errorf("segment %s@%d: %w", pid, first, err)
		}
		if off < from || slices.Contains(dead, off) {
			continue
		}
		m.Offset, m.CreatedAt, m.PartitionID, m.Partition, m.Queue = off, created, pid, pname, qname
		res.Messages = append(res.Messages, m)
	}
	return nil
}
