package http

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rsa"
	"errors"
	"fmt"
	"log/slog"
	nethttp "net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/VictoriaMetrics/metrics"
	"github.com/golang-jwt/jwt/v5"
	"github.com/valyala/fasthttp"
	"golang.org/x/time/rate"

	"github.com/queengo/queengo"
)

// AuthConfig configures JWT authentication (docs/api.md "Authentication"). The
// command fills it from the reference server's JWT_* variables and checks
// it; NewAuth only refuses an algorithm it has no key for.
type AuthConfig struct {
	// Algorithm is the token algorithm accepted: HS256, HS384, HS512,
	// RS384, RS512 or EdDSA accept exactly that one; RS256 accepts RS256,
	// RS384 and RS512, as the reference does; auto accepts each of them
	// that a key is configured for.
	Algorithm string
	// Secret is the HMAC key of the HS algorithms, used as is.
	Secret []byte
	// PublicKey (*rsa.PublicKey or ed25519.PublicKey) verifies RS and EdDSA
	// tokens; when set, JWKSURL is not used.
	PublicKey crypto.PublicKey
	// JWKSURL serves the RS and EdDSA keys by kid. They are fetched at
	// start, every JWKSRefresh after, and when a token names an unknown
	// kid (at most once per jwksUnknownKIDEvery); JWKSTimeout bounds each
	// fetch.
	JWKSURL     string
	JWKSRefresh time.Duration
	JWKSTimeout time.Duration
	// Issuer and Audience, when set, must be the token's iss and be among
	// its aud.
	Issuer, Audience string
	// ClockSkew is the tolerance of the exp, nbf and iat checks.
	ClockSkew time.Duration
	// AllowNoExp accepts tokens without an exp claim, for identity
	// providers that issue such; by default they are refused (401), as a
	// token that never expires cannot be taken back short of a key change.
	AllowNoExp bool
	// MaxTokenAge, when more than 0, refuses a token issued longer ago
	// (its iat, give or take ClockSkew), and a token without iat. It bounds
	// the life of tokens whose exp is far off or, with AllowNoExp, absent.
	MaxTokenAge time.Duration
	// RolesClaim names a string claim and RolesArrayClaim an array of
	// strings; the highest role found in either gives the token its level.
	RolesClaim, RolesArrayClaim string
	// RoleAdmin, RoleReadWrite and RoleReadOnly are the role names of the
	// admin, read-write and read-only levels.
	RoleAdmin, RoleReadWrite, RoleReadOnly string
	// SkipPaths are request paths served without a token: equal to an
	// entry, or under an entry longer than "/" that ends in "/".
	SkipPaths []string
}

// Auth checks the token of each request against the level of its route.
// A nil *Auth in Config means authentication is off.
type Auth struct {
	cfg    AuthConfig
	algs   []string // the token algorithms accepted
	parser *jwt.Parser
	jwks   keyfunc.Keyfunc // nil unless keys come from JWKSURL
	base   context.Context // ends at Close; parent of every JWKS fetch
	stop   context.CancelFunc
	cache  tokenCache
	log    *slog.Logger
	now    func() time.Time // time.Now; tests move it
	// verified counts full token checks, the cache's misses
	// (queengo_auth_signature_checks_total); the Server serving the
	// check registers it in its set.
	verified *metrics.Counter
}

// authVerifiedName is the counter of full token checks.
const authVerifiedName = `queengo_auth_signature_checks_total`

const (
	// jwksUnknownKIDEvery spaces the JWKS fetches that unknown kids cause:
	// the first token of a rotated key is served at once, or, when another
	// unknown kid caused a fetch moments ago, answered 503 (retryable) until
	// the next, at most this long later; a client sending made-up kids costs
	// the key server one fetch per period.
	jwksUnknownKIDEvery = 10 * time.Second
	// tokenCacheMaxAge bounds how long a verified token is trusted without
	// a new signature check (never past its exp), so a key dropped from
	// the JWKS stops being honoured a minute after the refresh that drops it.
	tokenCacheMaxAge = time.Minute
	// tokenCacheMax bounds the cache: a broker rarely sees more distinct
	// live tokens than clients, and 4096 tokens of about 1 KiB is 4 MiB.
	tokenCacheMax = 4096
)

// NewAuth builds the check. With JWKSURL it fetches the keys before
// returning (a failed fetch is logged and retried by the first token that
// needs a key) and refreshes them in the background until Close.
func NewAuth(cfg AuthConfig, log *slog.Logger) (*Auth, error) {
	if log == nil {
		log = slog.Default()
	}
	a := &Auth{cfg: cfg, log: log, now: time.Now, cache: tokenCache{m: map[string]*identity{}},
		verified: metrics.NewSet().NewCounter(authVerifiedName)}
	a.algs = acceptedAlgorithms(cfg)
	if len(a.algs) == 0 {
		return nil, fmt.Errorf("JWT algorithm %q is unknown or has no key configured", cfg.Algorithm)
	}
	opts := []jwt.ParserOption{
		jwt.WithLeeway(cfg.ClockSkew),
		jwt.WithIssuedAt(),
		jwt.WithTimeFunc(func() time.Time { return a.now() }),
	}
	if !cfg.AllowNoExp {
		opts = append(opts, jwt.WithExpirationRequired())
	}
	if cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(cfg.Issuer))
	}
	if cfg.Audience != "" {
		opts = append(opts, jwt.WithAudience(cfg.Audience))
	}
	a.parser = jwt.NewParser(opts...)
	a.base, a.stop = context.WithCancel(context.Background())
	if cfg.PublicKey == nil && cfg.JWKSURL != "" {
		var err error
		a.jwks, err = keyfunc.NewDefaultOverrideCtx(a.base, []string{cfg.JWKSURL}, keyfunc.Override{
			Client:                  &nethttp.Client{Timeout: cfg.JWKSTimeout},
			HTTPTimeout:             cfg.JWKSTimeout,
			RateLimitWaitMax:        cfg.JWKSTimeout,
			RefreshInterval:         cfg.JWKSRefresh,
			RefreshUnknownKID:       rate.NewLimiter(rate.Every(jwksUnknownKIDEvery), 1),
			RefreshErrorHandlerFunc: a.jwksFailed,
		})
		if err != nil {
			a.stop()
			return nil, fmt.Errorf("error starting the JWKS client: %w", err)
		}
	}
	log.Info("JWT authentication on", "algorithms", a.algs, "jwks", a.jwks != nil,
		"issuer", cfg.Issuer, "audience", cfg.Audience, "skip_paths", cfg.SkipPaths)
	return a, nil
}

// Close stops the background JWKS refresh.
func (a *Auth) Close() { a.stop() }

// acceptedAlgorithms lists the token algorithms cfg has a key for.
func acceptedAlgorithms(cfg AuthConfig) []string {
	hmac := len(cfg.Secret) > 0
	_, rsaKey := cfg.PublicKey.(*rsa.PublicKey)
	_, edKey := cfg.PublicKey.(ed25519.PublicKey)
	jwks := cfg.PublicKey == nil && cfg.JWKSURL != ""
	rs, ed := rsaKey || jwks, edKey || jwks
	var out []string
	add := func(ok bool, algs ...string) {
		if ok {
			out = append(out, algs...)
		}
	}
	switch cfg.Algorithm {
	case "HS256", "HS384", "HS512":
		add(hmac, cfg.Algorithm)
	case "RS256":
		add(rs, "RS256", "RS384", "RS512")
	case "RS384", "RS512":
		add(rs, cfg.Algorithm)
	case "EdDSA":
		add(ed, "EdDSA")
	case "auto":
		add(hmac, "HS256", "HS384", "HS512")
		add(rs, "RS256", "RS384", "RS512")
		add(ed, "EdDSA")
	}
	return out
}

// guard wraps h with the check of lv. With authentication off, and on a
// public route, it is h itself: nothing is read, nothing is spent.
func (s *Server) guard(lv level, h fasthttp.RequestHandler) fasthttp.RequestHandler {
	a := s.cfg.Auth
	if a == nil || lv == levelPublic {
		return h
	}
	return func(ctx *fasthttp.RequestCtx) {
		if a.skips(ctx.Request.URI().PathOriginal()) {
			h(ctx)
			return
		}
		id, e := a.check(ctx.Request.Header.Peek(fasthttp.HeaderAuthorization), lv)
		if e != nil {
			a.refuse(ctx, lv, *e)
			s.writeError(ctx, *e)
			return
		}
		ctx.SetUserValue(identityKey{}, id)
		h(ctx)
	}
}

// skips reports whether path is one of SkipPaths. It is the raw path, the
// one the router matched, so a skipped prefix cannot be reached through
// "..": the route served is always the one checked.
func (a *Auth) skips(path []byte) bool {
	for _, p := range a.cfg.SkipPaths {
		if string(path) == p ||
			len(p) > 1 && p[len(p)-1] == '/' && len(path) > len(p) && string(path[:len(p)]) == p {
			return true
		}
	}
	return false
}

// check verifies the Authorization header and the level of its token.
func (a *Auth) check(header []byte, need level) (*identity, *apiError) {
	if len(header) == 0 {
		return nil, &errAuthRequired
	}
	token := bearer(header)
	now := a.now()
	id, ok := a.cache.get(token, now.UnixNano())
	if !ok {
		var e *apiError
		if id, e = a.verify(string(token), now); e != nil {
			return nil, e
		}
		a.cache.put(token, id, now.UnixNano())
	}
	if id.level < need {
		return nil, &errForbidden
	}
	return id, nil
}

// bearer strips a "Bearer " prefix in any case; a header without one is
// the token itself, as the reference server takes it.
func bearer(h []byte) []byte {
	const prefix = "bearer "
	if len(h) > len(prefix) {
		for i := range len(prefix) {
			if h[i]|0x20 != prefix[i] { // ASCII lower case; ' '|0x20 is ' '
				return h
			}
		}
		return h[len(prefix):]
	}
	return h
}

// refuse logs a refused request and asks a 401's client for a bearer token;
// the caller answers e.
func (a *Auth) refuse(ctx *fasthttp.RequestCtx, lv level, e apiError) {
	if e.Status == fasthttp.StatusUnauthorized {
		ctx.Response.Header.Set(fasthttp.HeaderWWWAuthenticate, "Bearer")
	}
	a.log.Debug("request refused", "method", string(ctx.Method()), "path", string(ctx.Path()),
		"required", lv.String(), "status", e.Status, "error", e.Message)
}

// identity is what a verified token grants; shared by every request that
// presents the token, it is never modified.
type identity struct {
	sub   string
	level level
	until int64 // unix ns: the cached verification holds before this
}

// fetchFailure is the context key under which verify collects the error
// of a JWKS fetch its own token caused.
type fetchFailure struct{}

// jwksFailed logs a failed JWKS fetch and, when a token caused it, hands
// the error to that token's verify.
func (a *Auth) jwksFailed(url string) func(context.Context, error) {
	return func(ctx context.Context, err error) {
		a.log.Warn("JWKS fetch failed", "url", url, "err", err)
		if slot, ok := ctx.Value(fetchFailure{}).(*error); ok {
			*slot = err
		}
	}
}

// verify checks a token's signature and claims: the slow path, once per
// token per tokenCacheMaxAge.
func (a *Auth) verify(token string, now time.Time) (*identity, *apiError) {
	a.verified.Inc()
	var fetchErr error
	ctx := context.WithValue(a.base, fetchFailure{}, &fetchErr)
	claims := jwt.MapClaims{}
	t, err := a.parser.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		alg := t.Method.Alg()
		switch {
		case !slices.Contains(a.algs, alg):
			return nil, a.algorithmError(alg)
		case alg[0] == 'H':
			return a.cfg.Secret, nil
		case a.jwks != nil:
			return a.jwks.KeyfuncCtx(ctx)(t)
		}
		return a.cfg.PublicKey, nil
	})
	if err != nil {
		e := a.tokenError(t, err, fetchErr)
		return nil, &e
	}
	id := &identity{sub: stringClaim(claims["sub"]), level: a.levelOf(claims),
		until: now.Add(tokenCacheMaxAge).UnixNano()}
	if exp, _ := claims.GetExpirationTime(); exp != nil {
		id.until = min(id.until, exp.Add(a.cfg.ClockSkew).UnixNano())
	}
	if a.cfg.MaxTokenAge > 0 {
		iat, _ := claims.GetIssuedAt()
		if iat == nil {
			return nil, &errTokenNoIssuedAt
		}
		end := iat.Add(a.cfg.MaxTokenAge + a.cfg.ClockSkew)
		if !now.Before(end) {
			return nil, &errTokenTooOld
		}
		id.until = min(id.until, end.UnixNano())
	}
	return id, nil
}

// refusal is an answer decided inside the key function.
type refusal struct{ apiError }

func (r refusal) Error() string { return r.Message }

func (a *Auth) algorithmError(alg string) refusal {
	if a.cfg.Algorithm == "auto" {
		return refusal{errAlgorithmUnsupported(alg)}
	}
	return refusal{errAlgorithmMismatch(alg, a.cfg.Algorithm)}
}

// refreshRefused reports whether an unknown kid's key lookup failed because
// the rate limiter of unknown-kid refreshes refused it a fetch (jwkset's
// "failed to wait for JWK Set refresh rate limiter"; the error carries no
// type to test: TestJWKSUnknownKIDWithinThePeriodIsRetryable pins it).
func refreshRefused(err error) bool {
	return strings.Contains(err.Error(), "refresh rate limiter")
}

// tokenError maps a failed verification onto the answer the reference
// server gives for it.
func (a *Auth) tokenError(t *jwt.Token, err, fetchErr error) apiError {
	var r refusal
	switch {
	case errors.As(err, &r):
		return r.apiError
	case fetchErr != nil:
		return errJWKSFetch
	case errors.Is(err, keyfunc.ErrKeyfunc):
		// No key for the kid after the refresh it was allowed (or, when it
		// was not allowed one yet, pending), or none usable for the token's
		// algorithm.
		kid, _ := t.Header["kid"].(string)
		if refreshRefused(err) {
			return errKIDNotYetLooked(kid)
		}
		return errUnknownKID(kid)
	case errors.Is(err, jwt.ErrTokenMalformed):
		return errTokenDecode(err)
	case errors.Is(err, jwt.ErrTokenUnverifiable) && t != nil && t.Method == nil:
		// An alg golang-jwt does not know (or none at all).
		if alg, ok := t.Header["alg"].(string); ok {
			return a.algorithmError(alg).apiError
		}
		return errTokenDecode(err)
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return errTokenSignature
	case errors.Is(err, jwt.ErrTokenExpired):
		return errTokenExpired
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return errTokenNoExp
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return errTokenNotYetValid
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return errTokenIssuer
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return errTokenAudience
	}
	return errTokenInvalid(err)
}

// levelOf is the highest level the token's roles grant; a token without a
// known role reaches the public routes only.
func (a *Auth) levelOf(c jwt.MapClaims) level {
	best := levelPublic
	grant := func(role any) {
		switch role {
		case a.cfg.RoleAdmin:
			best = max(best, levelAdmin)
		case a.cfg.RoleReadWrite:
			best = max(best, levelReadWrite)
		case a.cfg.RoleReadOnly:
			best = max(best, levelReadOnly)
		}
	}
	if r, ok := c[a.cfg.RolesClaim].(string); ok {
		grant(r)
	}
	if rs, ok := c[a.cfg.RolesArrayClaim].([]any); ok {
		for _, r := range rs {
			grant(r)
		}
	}
	return best
}

func stringClaim(v any) string {
	s, _ := v.(string)
	return s
}

// tokenCache remembers verified tokens by their bytes: a client that
// reuses its token pays for the signature check once per tokenCacheMaxAge,
// not once per request.
type tokenCache struct {
	mu sync.RWMutex
	m  map[string]*identity
}

// get returns the identity of token while its verification holds.
func (c *tokenCache) get(token []byte, now int64) (*identity, bool) {
	c.mu.RLock()
	id := c.m[string(token)]
	c.mu.RUnlock()
	return id, id != nil && now < id.until
}

// put remembers token; when full, it first drops the entries past their
// time and, if none is, all of them.
func (c *tokenCache) put(token []byte, id *identity, now int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= tokenCacheMax {
		for k, v := range c.m {
			if v.until <= now {
				delete(c.m, k)
			}
		}
		if len(c.m) >= tokenCacheMax {
			clear(c.m)
		}
	}
	c.m[string(token)] = id
}

// identityKey is the request value under which guard leaves the *identity
// of the request's token.
type identityKey struct{}

// stamping is the Broker of the handlers when authentication is on: it
// sets every pushed message's ProducerSub to the sub of the request's
// token (§1.2), on a push and on a transaction's push operations alike.
// Nothing else sets it: a producerSub in a request body is never read.
type stamping struct{ Broker }

// subjectOf is the sub of the request's token, "" when it has none or the
// path was in SkipPaths.
func subjectOf(ctx context.Context) string {
	if id, _ := ctx.Value(identityKey{}).(*identity); id != nil {
		return id.sub
	}
	return ""
}

func (b stamping) Push(ctx context.Context, items []queengo.PushItem) ([]queengo.PushResult, error) {
	sub := subjectOf(ctx)
	for i := range items {
		items[i].ProducerSub = sub
	}
	return b.Broker.Push(ctx, items)
}

func (b stamping) Transaction(ctx context.Context, ops []queengo.TxOp) ([]queengo.TxResult, error) {
	sub := subjectOf(ctx)
	for _, op := range ops {
		if op.Push != nil {
			op.Push.ProducerSub = sub
		}
	}
	return b.Broker.Transaction(ctx, ops)
}
