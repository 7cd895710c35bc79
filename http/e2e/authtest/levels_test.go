package authtest

import (
	"net/http"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"

	"github.com/queengo/queengo/http/e2e"
)

// probe is a request to a route of a known level that needs no setup.
type probe struct {
	level, method, path string
	body                any
}

// probes has a route of each level; pushes and pops go to queue.
func probes(queue string) []probe {
	push := map[string]any{"items": []map[string]any{{"queue": queue, "payload": 1}}}
	return []probe{
		{"PUB", "GET", "/health", nil},
		{"PUB", "GET", "/metrics", nil},
		{"PUB", "GET", "/metrics/prometheus", nil},
		{"RO", "GET", "/api/v1/dlq" + e2e.Query("queue", queue), nil},
		{"RO", "GET", "/api/v1/messages/" + uuid.NewString() + "/tx-1", nil},
		{"RW", "POST", "/api/v1/push", push},
		{"RW", "GET", e2e.PopQueue(queue), nil},
		// The streams routes (issue 42): the SDKs' runtimes send them with
		// the data path's token.
		{"RW", "POST", "/streams/v1/queries", map[string]any{"name": queue, "source_queue": queue, "config_hash": "h"}},
		{"RW", "POST", "/streams/v1/state/get", map[string]any{"query_id": uuid.NewString(), "partition_id": uuid.NewString()}},
		{"RW", "POST", "/streams/v1/cycle", map[string]any{"query_id": uuid.NewString(), "partition_id": uuid.NewString()}},
		{"ADM", "GET", "/api/v1/system/maintenance/pop", nil},
	}
}

// rank orders the levels; a role reaches its own level and those below.
var rank = map[string]int{"PUB": 0, "RO": 1, "RW": 2, "ADM": 3}

// §1.2: each role reaches the routes of its level and below, and is
// refused 403 "Insufficient permissions" above; a token with no known role
// reaches the public routes only; roles come from "role" or "roles".
func TestEveryRoleAgainstARouteOfEachLevel(t *testing.T) {
	t.Parallel()
	s := hsBroker(t)
	q := e2e.Unique(t, "levels")
	withRoles := func(roles ...any) jwt.MapClaims {
		c := claims("svc", "")
		c["roles"] = roles
		return c
	}
	for _, tok := range []struct {
		name   string
		claims jwt.MapClaims
		reach  int
	}{
		{"no role", claims("svc", ""), 0},
		{"unknown role", claims("svc", "superuser"), 0},
		{"read-only", claims("svc", "read-only"), 1},
		{"read-write", claims("svc", "read-write"), 2},
		{"admin", claims("svc", "admin"), 3},
		{"roles array read-write", withRoles("viewer", "read-write"), 2},
		{"roles array admin beside role read-only", func() jwt.MapClaims {
			c := withRoles("admin")
			c["role"] = "read-only"
			return c
		}(), 3},
	} {
		authz := bearer(hs256(t, tok.claims))
		for _, p := range probes(q) {
			r := call(t, s, p.method, p.path, authz, p.body)
			what := tok.name + " on " + p.level + " " + p.method + " " + p.path
			if rank[p.level] <= tok.reach {
				wantAdmitted(t, what, r)
				continue
			}
			wantRefused(t, what, r, http.StatusForbidden, "Insufficient permissions")
		}
	}
}

// §1.2: without an Authorization header every route but the public ones is
// 401 "Authentication required", the routes of every level alike.
func TestNoTokenIs401OnEveryNonPublicRoute(t *testing.T) {
	t.Parallel()
	s := hsBroker(t)
	id, q := uuid.NewString(), e2e.Unique(t, "notoken")
	for _, p := range []probe{
		{"RW", "POST", "/api/v1/configure", map[string]any{"queue": q}},
		{"RW", "POST", "/api/v1/push", map[string]any{"items": []any{}}},
		{"RW", "GET", "/api/v1/pop" + e2e.Query("namespace", "ns"), nil},
		{"RW", "GET", e2e.PopQueue(q), nil},
		{"RW", "GET", e2e.PopPartition(q, "p"), nil},
		{"RW", "POST", "/api/v1/ack", map[string]any{}},
		{"RW", "POST", "/api/v1/ack/batch", map[string]any{}},
		{"RW", "POST", "/api/v1/lease/" + id + "/extend", nil},
		{"RW", "POST", "/api/v1/transaction", map[string]any{}},
		{"RW", "POST", "/streams/v1/queries", map[string]any{}},
		{"RW", "POST", "/streams/v1/state/get", map[string]any{}},
		{"RW", "POST", "/streams/v1/cycle", map[string]any{}},
		{"RO", "GET", "/api/v1/dlq", nil},
		{"RW", "POST", "/api/v1/dlq/" + id + "/requeue", nil},
		{"RW", "DELETE", "/api/v1/dlq/" + id, nil},
		{"RO", "GET", "/api/v1/messages/" + id + "/tx", nil},
		{"RW", "POST", "/api/v1/consumer-groups/g/subscription", map[string]any{}},
		{"ADM", "DELETE", "/api/v1/resources/queues/" + q, nil},
		{"ADM", "GET", "/api/v1/system/maintenance/pop", nil},
		{"ADM", "POST", "/api/v1/system/maintenance/pop", map[string]any{"enabled": false}},
	} {
		r := call(t, s, p.method, p.path, "", p.body)
		wantRefused(t, p.method+" "+p.path, r, http.StatusUnauthorized, "Authentication required")
	}
}

// §1.2: /health and the metrics routes never ask, even for a token that
// would be refused; OPTIONS (CORS preflight) neither, on any path (§1.1: a
// path that is no route included).
func TestPublicRoutesNeverAsk(t *testing.T) {
	t.Parallel()
	s := hsBroker(t)
	for _, authz := range []string{"", "Bearer not-a-token", bearer(sign(t, jwt.SigningMethodHS256, []byte("other secret"), "", claims("x", "admin")))} {
		for _, path := range []string{"/health", "/metrics", "/metrics/prometheus"} {
			if r := call(t, s, "GET", path, authz, nil); r.status != http.StatusOK {
				t.Errorf("GET %s with %q: %d %s", path, authz, r.status, r.body)
			}
		}
		for _, path := range []string{"/api/v1/push", "/api/v1/no-such-route"} {
			r := call(t, s, "OPTIONS", path, authz, nil)
			if r.status != http.StatusNoContent || r.header.Get("Access-Control-Allow-Origin") != "*" {
				t.Errorf("OPTIONS %s with %q: %d %v %s", path, authz, r.status, r.header, r.body)
			}
		}
	}
}

// §1.2: a case-insensitive "Bearer " prefix is stripped; a header without
// it is the token itself.
func TestBearerPrefixIsOptionalAndCaseInsensitive(t *testing.T) {
	t.Parallel()
	s := hsBroker(t)
	tok := hs256(t, claims("svc", "admin"))
	for _, authz := range []string{"Bearer " + tok, "bearer " + tok, "BEARER " + tok, tok} {
		wantAdmitted(t, authz[:7], call(t, s, "GET", "/api/v1/system/maintenance/pop", authz, nil))
	}
}

// §1.2: JWT_SKIP_PATHS serves its paths without a token, exactly or under
// an entry ending in "/"; every other route still asks, and ".." cannot
// reach one through a skipped prefix.
func TestSkipPathsAreServedWithoutAToken(t *testing.T) {
	t.Parallel()
	s := e2e.Start(t, append(hsEnv, "JWT_SKIP_PATHS=/api/v1/dlq, /api/v1/pop/")...)
	q := e2e.Unique(t, "skip")
	for _, path := range []string{"/api/v1/dlq", e2e.PopQueue(q)} {
		wantAdmitted(t, path, call(t, s, "GET", path, "", nil))
	}
	wantRefused(t, "push", call(t, s, "POST", "/api/v1/push", "", map[string]any{"items": []any{}}),
		http.StatusUnauthorized, "Authentication required")
	wantRefused(t, "/api/v1/pop without the slash", call(t, s, "GET", "/api/v1/pop?namespace=x", "", nil),
		http.StatusUnauthorized, "Authentication required")
	if r := call(t, s, "GET", "/api/v1/pop/../system/maintenance/pop", "", nil); r.status == http.StatusOK {
		t.Fatalf("a skipped prefix reached an admin route: %s", r.body)
	}
}

// With JWT_ENABLED unset nothing changes: the Authorization header is not
// read, every route is open.
func TestAuthOffIgnoresTheHeader(t *testing.T) {
	t.Parallel()
	s := e2e.Shared(t)
	for _, authz := range []string{"", "Bearer not-a-token"} {
		if r := call(t, s, "GET", "/api/v1/system/maintenance/pop", authz, nil); r.status != http.StatusOK {
			t.Fatalf("with %q: %d %s", authz, r.status, r.body)
		}
	}
}
