package http

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/router"
	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"github.com/queengo/queengo"
)

// specLevels is the access level (docs/api.md "Authentication", the reference server's) of every route
// the broker serves. Routes the reference's table lacks get the level of their
// nearest kin: the two DLQ write routes and a message's retry and move to
// the DLQ change data, as a message delete (RW) does; a queue clear drops
// data, as a queue delete (ADM) does; the partitions list reads, as the
// other resource lists (RO) do.
var specLevels = map[string]level{
	"GET /":                         levelPublic,
	"GET /assets/{filepath:*}":      levelPublic,
	"GET /health":                   levelPublic,
	"GET /health/live":              levelPublic,
	"GET /health/ready":             levelPublic,
	"GET /metrics":                  levelPublic,
	"GET /metrics/prometheus":       levelPublic,
	"POST /api/v1/configure":        levelReadWrite,
	"POST /api/v1/push":             levelReadWrite,
	"GET /api/v1/pop":               levelReadWrite,
	"GET /api/v1/pop/queue/{queue}": levelReadWrite,
	"GET /api/v1/pop/queue/{queue}/partition/{partition}": levelReadWrite,
	"POST /api/v1/ack":                                   levelReadWrite,
	"POST /api/v1/ack/batch":                             levelReadWrite,
	"POST /api/v1/lease/{leaseId}/extend":                levelReadWrite,
	"POST /api/v1/transaction":                           levelReadWrite,
	"POST /streams/v1/queries":                           levelReadWrite,
	"POST /streams/v1/state/get":                         levelReadWrite,
	"POST /streams/v1/cycle":                             levelReadWrite,
	"GET /api/v1/streams":                                levelReadOnly,
	"GET /api/v1/streams/{name}":                         levelReadOnly,
	"POST /api/v1/streams/{name}/reset":                  levelAdmin,
	"GET /api/v1/dlq":                                    levelReadOnly,
	"POST /api/v1/dlq/{id}/requeue":                      levelReadWrite,
	"DELETE /api/v1/dlq/{id}":                            levelReadWrite,
	"GET /api/v1/messages/{partitionId}/{transactionId}": levelReadOnly,
	"POST /api/v1/consumer-groups/{group}/subscription":  levelReadWrite,
	"DELETE /api/v1/resources/queues/{queue}":            levelAdmin,
	"GET /api/v1/system/maintenance":                     levelAdmin,
	"POST /api/v1/system/maintenance":                    levelAdmin,
	"GET /api/v1/system/maintenance/pop":                 levelAdmin,
	"POST /api/v1/system/maintenance/pop":                levelAdmin,
	"GET /api/v1/system/shared-state":                    levelAdmin,
	"GET /api/v1/system/config":                          levelAdmin,

	"GET /api/v1/consumer-groups":                                                     levelReadOnly,
	"GET /api/v1/consumer-groups/lagging":                                             levelReadOnly,
	"GET /api/v1/consumer-groups/{group}":                                             levelReadOnly,
	"DELETE /api/v1/consumer-groups/{group}":                                          levelAdmin,
	"DELETE /api/v1/consumer-groups/{group}/queues/{queue}":                           levelAdmin,
	"POST /api/v1/consumer-groups/{group}/queues/{queue}/seek":                        levelReadWrite,
	"POST /api/v1/consumer-groups/{group}/queues/{queue}/partitions/{partition}/seek": levelReadWrite,
	"POST /api/v1/stats/refresh":                                                      levelAdmin,

	"GET /api/v1/resources/overview":                            levelReadOnly,
	"GET /api/v1/resources/queues":                              levelReadOnly,
	"GET /api/v1/resources/queues/{queue}":                      levelReadOnly,
	"GET /api/v1/resources/namespaces":                          levelReadOnly,
	"GET /api/v1/resources/tasks":                               levelReadOnly,
	"GET /api/v1/resources/partitions":                          levelReadOnly,
	"DELETE /api/v1/queues/{queue}/clear":                       levelAdmin,
	"GET /api/v1/messages":                                      levelReadOnly,
	"DELETE /api/v1/messages/{partitionId}/{transactionId}":     levelReadWrite,
	"POST /api/v1/messages/{partitionId}/{transactionId}/retry": levelReadWrite,
	"POST /api/v1/messages/{partitionId}/{transactionId}/dlq":   levelReadWrite,

	"GET /api/v1/status":                          levelReadOnly,
	"GET /api/v1/status/queues":                   levelReadOnly,
	"GET /api/v1/status/queues/{queue}":           levelReadOnly,
	"GET /api/v1/status/queues/{queue}/messages":  levelReadOnly,
	"GET /api/v1/status/analytics":                levelReadOnly,
	"GET /api/v1/status/buffers":                  levelReadOnly,
	"GET /api/v1/analytics/system-metrics":        levelReadOnly,
	"GET /api/v1/analytics/worker-metrics":        levelReadOnly,
	"GET /api/v1/analytics/postgres-stats":        levelReadOnly,
	"GET /api/v1/analytics/queue-lag":             levelReadOnly,
	"GET /api/v1/analytics/queue-ops":             levelReadOnly,
	"GET /api/v1/analytics/queue-parked-replicas": levelReadOnly,
	"GET /api/v1/analytics/retention":             levelReadOnly,

	"POST /api/v1/traces":                              levelReadWrite,
	"GET /api/v1/traces/names":                         levelReadOnly,
	"GET /api/v1/traces/by-name/{traceName}":           levelReadOnly,
	"GET /api/v1/traces/{partitionId}/{transactionId}": levelReadOnly,
}

func TestAuthRouteLevelsFollowTheSpec(t *testing.T) {
	t.Parallel()
	s := &Server{}
	seen := map[string]bool{}
	for _, rt := range s.routes() {
		key := rt.method + " " + rt.path
		want, ok := specLevels[key]
		switch {
		case !ok:
			t.Errorf("%s is in the route table but not in specLevels: add its Auth level from the spec", key)
		case rt.level != want:
			t.Errorf("%s: level %s, the spec says %s", key, rt.level, want)
		}
		seen[key] = true
	}
	for key := range specLevels {
		if !seen[key] {
			t.Errorf("%s is not served", key)
		}
	}
}

// The router New builds is walked (mustBeLeveled): New returning at all
// means every registered route has an entry in the table.
func TestAuthEveryRegisteredRouteHasALevel(t *testing.T) {
	t.Parallel()
	s := New(Config{}, nil)
	r := router.New()
	s.register(r, s.routes())
	if got := s.unleveled(r); len(got) != 0 {
		t.Fatalf("routes outside the table: %v", got)
	}
	n := 0
	for _, paths := range r.List() {
		n += len(paths)
	}
	if n != len(specLevels) {
		t.Fatalf("the router lists %d routes, the spec table %d", n, len(specLevels))
	}
}

func TestAuthRouteOutsideTheTableStopsTheBroker(t *testing.T) {
	t.Parallel()
	s := &Server{}
	r := router.New()
	s.register(r, s.routes())
	r.GET("/api/v1/added-later", func(*fasthttp.RequestCtx) {})
	msg := panicOf(func() { s.mustBeLeveled(r) })
	if !strings.Contains(msg, "GET /api/v1/added-later") {
		t.Fatalf("mustBeLeveled did not refuse the route: panic %q", msg)
	}
}

func TestAuthRouteWithoutALevelStopsTheBroker(t *testing.T) {
	t.Parallel()
	s := &Server{}
	table := []route{{method: fasthttp.MethodGet, path: "/api/v1/forgotten", handle: func(*fasthttp.RequestCtx) {}}}
	msg := panicOf(func() { s.register(router.New(), table) })
	if !strings.Contains(msg, "/api/v1/forgotten has no access level") {
		t.Fatalf("register did not refuse the route: panic %q", msg)
	}
}

func panicOf(f func()) (msg string) {
	defer func() {
		if v := recover(); v != nil {
			msg, _ = v.(string)
		}
	}()
	f()
	return ""
}

func TestAuthBearerPrefixIsCaseInsensitiveAndOptional(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"Bearer abc": "abc", "bearer abc": "abc", "BEARER abc": "abc", "bEaReR abc": "abc",
		"abc": "abc", "Bearer": "Bearer", "Bearer ": "Bearer ", "Basic abc": "Basic abc", "Bearerabc": "Bearerabc",
	} {
		if got := string(bearer([]byte(in))); got != want {
			t.Errorf("bearer(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAuthSkipPathsMatchExactlyOrUnderAnEntryEndingInSlash(t *testing.T) {
	t.Parallel()
	a := &Auth{cfg: AuthConfig{SkipPaths: []string{"/", "/api/v1/dlq", "/api/v1/pop/"}}}
	for path, want := range map[string]bool{
		"/": true, "/api/v1/dlq": true, "/api/v1/dlq/x/requeue": false, "/api/v1/pop/queue/q": true,
		"/api/v1/pop/": true, "/api/v1/pop": false, "/api/v1/push": false, "/api/v1/popular": false,
	} {
		if got := a.skips([]byte(path)); got != want {
			t.Errorf("skips(%q) = %v, want %v", path, got, want)
		}
	}
}

// testSecret signs the HS256 tokens of the unit tests.
var testSecret = []byte("unit-test-secret")

func newTestAuth(t testing.TB, now time.Time) *Auth {
	t.Helper()
	a, err := NewAuth(AuthConfig{Algorithm: "HS256", Secret: testSecret, ClockSkew: 30 * time.Second,
		RolesClaim: "role", RolesArrayClaim: "roles", RoleAdmin: "admin", RoleReadWrite: "read-write",
		RoleReadOnly: "read-only"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	a.now = func() time.Time { return now }
	return a
}

func hs256(t testing.TB, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAuthCachedTokenHoldsUntilExpiryPlusClockSkew(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_800_000_000, 0)
	a := newTestAuth(t, t0)
	tok := "Bearer " + hs256(t, jwt.MapClaims{"sub": "svc-a", "role": "read-write", "exp": t0.Add(10 * time.Second).Unix()})
	for _, step := range []struct {
		at   time.Duration
		want string // "" for admitted
	}{
		{0, ""},
		{39 * time.Second, ""}, // exp + 29 s: within the 30 s skew
		{41 * time.Second, errTokenExpired.Message},
	} {
		a.now = func() time.Time { return t0.Add(step.at) }
		id, e := a.check([]byte(tok), levelReadWrite)
		switch {
		case step.want == "" && (e != nil || id.sub != "svc-a"):
			t.Fatalf("at +%v: %+v, refused %v", step.at, id, e)
		case step.want != "" && (e == nil || e.Message != step.want):
			t.Fatalf("at +%v: want %q, got %+v, refused %v", step.at, step.want, id, e)
		}
	}
}

func TestAuthCachedTokenIsCheckedAgainAfterAMinute(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_800_000_000, 0)
	a := newTestAuth(t, t0)
	tok := []byte(hs256(t, jwt.MapClaims{"role": "admin", "exp": t0.Add(time.Hour).Unix()})) // exp past the cache's age
	if _, e := a.check(tok, levelAdmin); e != nil {
		t.Fatal(e)
	}
	if _, ok := a.cache.get(tok, t0.Add(tokenCacheMaxAge-time.Nanosecond).UnixNano()); !ok {
		t.Fatal("not cached")
	}
	if _, ok := a.cache.get(tok, t0.Add(tokenCacheMaxAge).UnixNano()); ok {
		t.Fatal("still trusted past tokenCacheMaxAge")
	}
}

func TestAuthCacheIsBounded(t *testing.T) {
	t.Parallel()
	c := tokenCache{m: map[string]*identity{}}
	for i := range tokenCacheMax + 10 {
		c.put([]byte("token-"+strconv.Itoa(i)), &identity{until: 2}, 1)
	}
	if n := len(c.m); n > tokenCacheMax {
		t.Fatalf("%d entries, bound %d", n, tokenCacheMax)
	}
}

func TestAuthRoleLevelsIncludeTheLevelsBelow(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_800_000_000, 0)
	a := newTestAuth(t, t0)
	for _, tc := range []struct {
		claims jwt.MapClaims
		max    level
	}{
		{jwt.MapClaims{}, levelPublic},
		{jwt.MapClaims{"role": "read-only"}, levelReadOnly},
		{jwt.MapClaims{"role": "read-write"}, levelReadWrite},
		{jwt.MapClaims{"role": "admin"}, levelAdmin},
		{jwt.MapClaims{"roles": []string{"x", "read-only"}}, levelReadOnly},
		{jwt.MapClaims{"role": "read-only", "roles": []string{"admin"}}, levelAdmin},
		{jwt.MapClaims{"role": "superuser"}, levelPublic},
	} {
		tc.claims["exp"] = t0.Add(time.Hour).Unix()
		tok := []byte(hs256(t, tc.claims))
		for _, need := range []level{levelReadOnly, levelReadWrite, levelAdmin} {
			_, e := a.check(tok, need)
			if allowed := e == nil; allowed != (need <= tc.max) {
				t.Errorf("%v against %s: refused %v", tc.claims, need, e)
			}
			if e != nil && *e != errForbidden {
				t.Errorf("%v against %s: %v, want 403", tc.claims, need, e)
			}
		}
	}
}

// nopBroker stands for the actor tree in the benchmarks.
type nopBroker struct{ Broker }

func (nopBroker) Push(_ context.Context, items []queengo.PushItem) ([]queengo.PushResult, error) {
	return nil, nil
}

// pushHandler is what authentication adds to a push of one message beyond
// the route's own work: the check, then the stamping of producerSub.
func pushHandler(s *Server) fasthttp.RequestHandler {
	items := []queengo.PushItem{{Queue: "q", Partition: "Default", Frame: queengo.Frame{ID: uuid.New()}}}
	return s.guard(levelReadWrite, func(ctx *fasthttp.RequestCtx) { _, _ = s.broker.Push(ctx, items) })
}

func benchRequest(b *testing.B, token string) *fasthttp.RequestCtx {
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod(fasthttp.MethodPost)
	ctx.Request.SetRequestURI("/api/v1/push")
	ctx.Request.SetBodyString(`{"items":[{"queue":"q","payload":{"n":1}}]}`)
	if token != "" {
		ctx.Request.Header.Set(fasthttp.HeaderAuthorization, "Bearer "+token)
	}
	return &ctx
}

// benchToken is a typical identity-provider token: sub, role, iss, aud,
// iat, exp (about 250 bytes).
func benchToken(b *testing.B) string {
	now := time.Now()
	return hs256(b, jwt.MapClaims{"sub": "svc-orders-producer", "role": "read-write", "iss": "https://idp.example.com",
		"aud": "queengo", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
}

func benchServer(auth *Auth) *Server {
	var broker Broker = nopBroker{}
	if auth != nil {
		broker = stamping{broker}
	}
	return &Server{cfg: Config{Auth: auth}, broker: broker}
}

// BenchmarkAuthOff is the baseline: the push handler with JWT_ENABLED off.
func BenchmarkAuthOff(b *testing.B) {
	h := pushHandler(benchServer(nil))
	ctx := benchRequest(b, "")
	b.ReportAllocs()
	for b.Loop() {
		h(ctx)
	}
}

// BenchmarkAuthHS256 is a push with a token seen before (the cache).
func BenchmarkAuthHS256(b *testing.B) {
	a := newTestAuth(b, time.Now())
	a.now = time.Now
	h := pushHandler(benchServer(a))
	ctx := benchRequest(b, benchToken(b))
	h(ctx)
	if ctx.Response.StatusCode() != fasthttp.StatusOK {
		b.Fatalf("refused: %s", ctx.Response.Body())
	}
	b.ReportAllocs()
	for b.Loop() {
		h(ctx)
	}
}

// BenchmarkAuthHS256Parallel is BenchmarkAuthHS256 from every core at once
// (the cache's lock shared).
func BenchmarkAuthHS256Parallel(b *testing.B) {
	a := newTestAuth(b, time.Now())
	a.now = time.Now
	h := pushHandler(benchServer(a))
	tok := benchToken(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := benchRequest(b, tok)
		for pb.Next() {
			h(ctx)
		}
	})
}

// BenchmarkAuthHS256Uncached is the first request of a token: the full
// signature and claims check, paid once per token per tokenCacheMaxAge.
func BenchmarkAuthHS256Uncached(b *testing.B) {
	a := newTestAuth(b, time.Now())
	a.now = time.Now
	tok := benchToken(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, e := a.verify(tok, time.Now()); e != nil {
			b.Fatal(e)
		}
	}
}
