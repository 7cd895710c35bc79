package actors

import (
	"context"
	"errors"
	"sync"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// fakeStore is an in-memory Store for the actor tests. Each method answers
// from its hook when the test set one, else with a harmless default. Appends
// dedupe by transaction id across calls, as queen.append_segments does.
type fakeStore struct {
	queue queengo.Queue

	ensure func(ctx context.Context) error
	claim  func(ctx context.Context, claims []queengo.ClaimParams) ([]queengo.ClaimResult, error)
	append func(ctx context.Context, segs []queengo.Segment) error
	lookup func(ctx context.Context, name string) (uuid.UUID, error)

	mu       sync.Mutex
	ensured  map[string]int          // EnsurePartition calls per partition name
	rounds   [][]queengo.ClaimParams // every Claim and AckClaim call's claims, in order
	stored   map[string]uuid.UUID    // transaction id -> message id
	ackCalls []ackedCall             // every Ack and AckClaim call, in order
	// appendClaims is, per AppendClaim call in order, how many claims rode
	// with its segments.
	appendClaims []int
}

// ackedCall is one call that applied acks: its items, and the claims that
// rode with them (AckClaim; none for Ack).
type ackedCall struct {
	items  []queengo.AckItem
	claims int
}

func newFakeStore() *fakeStore {
	return &fakeStore{
		queue:  queengo.Queue{ID: uuid.New(), Name: "q", Namespace: "ns", Options: queengo.QueueOptions{LeaseTime: 60}},
		stored: map[string]uuid.UUID{}, ensured: map[string]int{},
	}
}

func (f *fakeStore) EnsureQueue(ctx context.Context, _ string) (queengo.Queue, error) {
	if f.ensure != nil {
		if err := f.ensure(ctx); err != nil {
			return queengo.Queue{}, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.queue, nil
}

func (f *fakeStore) QueuesInScope(context.Context, string, string) ([]queengo.Queue, error) {
	return []queengo.Queue{f.queue}, nil
}

func (f *fakeStore) EnsurePartition(_ context.Context, _ uuid.UUID, name string) (uuid.UUID, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ensured[name]++
	return uuid.NewSHA1(uuid.NameSpaceOID, []byte(name)), nil
}

// ensuredOf is how many times partition name was looked up for a write.
func (f *fakeStore) ensuredOf(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ensured[name]
}

func (f *fakeStore) LookupPartition(ctx context.Context, _ uuid.UUID, name string) (uuid.UUID, error) {
	if f.lookup != nil {
		return f.lookup(ctx, name)
	}
	return uuid.NewSHA1(uuid.NameSpaceOID, []byte(name)), nil
}

func (f *fakeStore) Append(ctx context.Context, segs []queengo.Segment) ([][]uuid.UUID, error) {
	if f.append != nil {
		if err := f.append(ctx, segs); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([][]uuid.UUID, len(segs))
	for i, s := range segs {
		out[i] = make([]uuid.UUID, len(s.Frames))
		for j, fr := range s.Frames {
			if id, ok := f.stored[fr.TransactionID]; ok {
				out[i][j] = id
				continue
			}
			f.stored[fr.TransactionID] = fr.ID
		}
	}
	return out, nil
}

func (f *fakeStore) Claim(ctx context.Context, claims []queengo.ClaimParams) ([]queengo.ClaimResult, error) {
	f.mu.Lock()
	f.rounds = append(f.rounds, append([]queengo.ClaimParams(nil), claims...))
	f.mu.Unlock()
	if f.claim != nil {
		return f.claim(ctx, claims)
	}
	return make([]queengo.ClaimResult, len(claims)), nil
}

// AppendClaim appends as Append does, then claims as Claim does, the
// claims seeing the write.
func (f *fakeStore) AppendClaim(ctx context.Context, segs []queengo.Segment, claims []queengo.ClaimParams) ([][]uuid.UUID, []queengo.ClaimResult, bool, error) {
	f.mu.Lock()
	f.appendClaims = append(f.appendClaims, len(claims))
	f.mu.Unlock()
	dups, err := f.Append(ctx, segs)
	res, cerr := f.Claim(ctx, claims)
	if cerr != nil {
		res = make([]queengo.ClaimResult, len(claims))
		for i := range res {
			res[i].Err = cerr
		}
	}
	return dups, res, err == nil, err
}

func (f *fakeStore) PopMaintenance(context.Context) (bool, error) { return false, nil }

func (f *fakeStore) Ack(_ context.Context, items []queengo.AckItem) ([]queengo.AckResult, error) {
	f.mu.Lock()
	f.ackCalls = append(f.ackCalls, ackedCall{items: items})
	f.mu.Unlock()
	return make([]queengo.AckResult, len(items)), nil
}

// AckClaim records the acks with the claims, answers each ack a success
// that ends its lease, and claims as Claim does.
func (f *fakeStore) AckClaim(ctx context.Context, items []queengo.AckItem, claims []queengo.ClaimParams) ([]queengo.AckResult, []queengo.ClaimResult, error) {
	f.mu.Lock()
	f.ackCalls = append(f.ackCalls, ackedCall{items: items, claims: len(claims)})
	f.mu.Unlock()
	acks := make([]queengo.AckResult, len(items))
	for i := range acks {
		acks[i] = queengo.AckResult{Success: true, LeaseReleased: true, Queue: f.queue.Name}
	}
	res, err := f.Claim(ctx, claims)
	if err != nil {
		res = make([]queengo.ClaimResult, len(claims))
		for i := range res {
			res[i].Err = err
		}
	}
	return acks, res, nil
}

func (f *fakeStore) acked() []ackedCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]ackedCall(nil), f.ackCalls...)
}

func (f *fakeStore) Transaction(_ context.Context, ops []queengo.TxOp) ([]queengo.TxResult, error) {
	return make([]queengo.TxResult, len(ops)), nil
}

func (f *fakeStore) RequeueDeadLetter(context.Context, uuid.UUID) (queengo.DeadLetter, queengo.Frame, error) {
	return queengo.DeadLetter{}, queengo.Frame{}, queengo.ErrNotFound
}

func (f *fakeStore) storedCount(txid string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.stored[txid]; ok {
		return 1
	}
	return 0
}

func (f *fakeStore) roundSizes() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]int, len(f.rounds))
	for i, r := range f.rounds {
		out[i] = len(r)
	}
	return out
}

// deliverOwn is a claim hook that serves every claim one message whose
// transaction id is the claim's lease id, so each pop can tell its own.
func deliverOwn(claims []queengo.ClaimParams) []queengo.ClaimResult {
	out := make([]queengo.ClaimResult, len(claims))
	for i, p := range claims {
		out[i].Messages = []queengo.Message{{Frame: queengo.Frame{ID: uuid.New(), TransactionID: p.LeaseID.String(),
			Payload: []byte("1")}}}
		out[i].Taken = 1
		// More is claimable: keeps the queue actor's ready set from
		// answering later pops empty without a claim.
		out[i].Ready = []uuid.UUID{readyPartition}
	}
	return out
}

var readyPartition = uuid.NewSHA1(uuid.NameSpaceOID, []byte("ready"))

var errBadClaim = errors.New("value out of range for type integer")

func (f *fakeStore) RegisterStream(context.Context, queengo.StreamRegistration) (queengo.StreamRegistered, error) {
	return queengo.StreamRegistered{}, nil
}

func (f *fakeStore) StreamState(context.Context, queengo.StateFilter) ([]queengo.StateRow, error) {
	return nil, nil
}

func (f *fakeStore) Cycle(context.Context, *queengo.Cycle) (queengo.CycleResult, error) {
	return queengo.CycleResult{}, nil
}
