package authtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/queengo/queengo/http/e2e"
)

// adminRoute is an ADM route that needs no setup: a token admitted there
// has passed every check.
const adminRoute = "/api/v1/system/maintenance/pop"

// with returns c with the changes applied (a nil value deletes the claim).
func with(c jwt.MapClaims, changes jwt.MapClaims) jwt.MapClaims {
	for k, v := range changes {
		if v == nil {
			delete(c, k)
			continue
		}
		c[k] = v
	}
	return c
}

// §1.2: a malformed, badly signed, expired, not yet valid token, or one of
// another issuer, audience or algorithm, is 401 with the reference
// server's message.
func TestBadTokenIs401WithTheReferenceMessage(t *testing.T) {
	t.Parallel()
	s := hsBroker(t)
	now := time.Now()
	for _, c := range []struct {
		name, authz, msg string
	}{
		{"malformed", "Bearer not.a-token", "Token decode error: *"},
		{"two segments", "Bearer abc.def", "Token decode error: *"},
		{"signed with another secret", bearer(sign(t, jwt.SigningMethodHS256, []byte("another secret"), "", claims("x", "admin"))),
			"Invalid token signature"},
		{"claims swapped under a signature", func() string {
			good := strings.Split(hs256(t, claims("x", "read-only")), ".")
			forged := strings.Split(hs256(t, claims("x", "admin")), ".")
			return bearer(good[0] + "." + forged[1] + "." + good[2])
		}(), "Invalid token signature"},
		{"expired past the skew", bearer(hs256(t, with(claims("x", "admin"), jwt.MapClaims{"exp": now.Add(-time.Minute).Unix()}))),
			"Token has expired"},
		{"not yet valid past the skew", bearer(hs256(t, with(claims("x", "admin"), jwt.MapClaims{"nbf": now.Add(2 * time.Minute).Unix()}))),
			"Token is not yet valid"},
		{"issued in the future past the skew", bearer(hs256(t, with(claims("x", "admin"), jwt.MapClaims{"iat": now.Add(2 * time.Minute).Unix()}))),
			"Token is not yet valid"},
		{"another issuer", bearer(hs256(t, with(claims("x", "admin"), jwt.MapClaims{"iss": "https://evil.example"}))),
			"Invalid token issuer"},
		{"another audience", bearer(hs256(t, with(claims("x", "admin"), jwt.MapClaims{"aud": []string{"other", "api"}}))),
			"Invalid token audience"},
		{"another algorithm", bearer(sign(t, jwt.SigningMethodHS384, []byte(secret), "", claims("x", "admin"))),
			"Token uses HS384, expected HS256"},
		{"alg none", bearer(sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "", claims("x", "admin"))),
			"Token uses none, expected HS256"},
	} {
		wantRefused(t, c.name, call(t, s, "GET", adminRoute, c.authz, nil), http.StatusUnauthorized, c.msg)
	}
	// The audience may be one of several.
	c := with(claims("x", "admin"), jwt.MapClaims{"aud": []string{"other", audience}})
	wantAdmitted(t, "aud among several", call(t, s, "GET", adminRoute, bearer(hs256(t, c)), nil))
}

// JWT_CLOCK_SKEW (30 s by default) tolerates an exp just past and an nbf
// just ahead; with 0 neither is tolerated.
func TestClockSkewToleratesExpiryAndNotBefore(t *testing.T) {
	t.Parallel()
	s := hsBroker(t)
	strict := e2e.Start(t, append(hsEnv, "JWT_CLOCK_SKEW=0")...)
	now := time.Now()
	expired := bearer(hs256(t, with(claims("x", "admin"), jwt.MapClaims{"exp": now.Add(-10 * time.Second).Unix()})))
	early := bearer(hs256(t, with(claims("x", "admin"), jwt.MapClaims{"nbf": now.Add(10 * time.Second).Unix()})))
	wantAdmitted(t, "exp 10 s ago, skew 30 s", call(t, s, "GET", adminRoute, expired, nil))
	wantAdmitted(t, "nbf in 10 s, skew 30 s", call(t, s, "GET", adminRoute, early, nil))
	wantRefused(t, "exp 10 s ago, skew 0", call(t, strict, "GET", adminRoute, expired, nil),
		http.StatusUnauthorized, "Token has expired")
	wantRefused(t, "nbf in 10 s, skew 0", call(t, strict, "GET", adminRoute, early, nil),
		http.StatusUnauthorized, "Token is not yet valid")
}

// JWT_ALGORITHM=RS256 with JWT_PUBLIC_KEY: RS256 tokens (and RS384/RS512,
// as the reference) verify against the PEM key; other algorithms, other
// keys, and an HS256 token signed with the public key as its secret (the
// algorithm-confusion attack) are refused.
func TestRS256WithAPublicKey(t *testing.T) {
	t.Parallel()
	pub := publicPEM(t, rsaKey())
	s := e2e.Start(t, "JWT_ENABLED=true", "JWT_ALGORITHM=RS256", "JWT_PUBLIC_KEY="+pub)
	for _, m := range []jwt.SigningMethod{jwt.SigningMethodRS256, jwt.SigningMethodRS384, jwt.SigningMethodRS512} {
		wantAdmitted(t, m.Alg(), call(t, s, "GET", adminRoute, bearer(sign(t, m, rsaKey(), "", claims("x", "admin"))), nil))
	}
	for _, c := range []struct{ name, authz, msg string }{
		{"another key", bearer(sign(t, jwt.SigningMethodRS256, rsaKey2(), "", claims("x", "admin"))), "Invalid token signature"},
		{"EdDSA", bearer(sign(t, jwt.SigningMethodEdDSA, edKey(), "", claims("x", "admin"))), "Token uses EdDSA, expected RS256"},
		{"HS256 keyed with the public key", bearer(sign(t, jwt.SigningMethodHS256, []byte(pub), "", claims("x", "admin"))),
			"Token uses HS256, expected RS256"},
	} {
		wantRefused(t, c.name, call(t, s, "GET", adminRoute, c.authz, nil), http.StatusUnauthorized, c.msg)
	}
}

// JWT_ALGORITHM=EdDSA with an Ed25519 JWT_PUBLIC_KEY.
func TestEdDSAWithAPublicKey(t *testing.T) {
	t.Parallel()
	s := e2e.Start(t, "JWT_ENABLED=true", "JWT_ALGORITHM=EdDSA", "JWT_PUBLIC_KEY="+publicPEM(t, edKey()))
	wantAdmitted(t, "EdDSA", call(t, s, "GET", adminRoute, bearer(sign(t, jwt.SigningMethodEdDSA, edKey(), "", claims("x", "admin"))), nil))
	wantRefused(t, "RS256", call(t, s, "GET", adminRoute, bearer(sign(t, jwt.SigningMethodRS256, rsaKey(), "", claims("x", "admin"))), nil),
		http.StatusUnauthorized, "Token uses RS256, expected EdDSA")
}

// JWT_ALGORITHM=auto verifies each token by its own algorithm with the key
// configured for it: HS256 with JWT_SECRET, RS256 with JWT_PUBLIC_KEY; an
// algorithm without a key is "Unsupported algorithm".
func TestAutoPicksTheKeyByTheTokensAlgorithm(t *testing.T) {
	t.Parallel()
	s := e2e.Start(t, "JWT_ENABLED=true", "JWT_ALGORITHM=auto", "JWT_SECRET="+secret, "JWT_PUBLIC_KEY="+publicPEM(t, rsaKey()))
	wantAdmitted(t, "HS256", call(t, s, "GET", adminRoute, bearer(sign(t, jwt.SigningMethodHS256, []byte(secret), "", claims("x", "admin"))), nil))
	wantAdmitted(t, "RS256", call(t, s, "GET", adminRoute, bearer(sign(t, jwt.SigningMethodRS256, rsaKey(), "", claims("x", "admin"))), nil))
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, authz, msg string }{
		{"EdDSA without an Ed25519 key", bearer(sign(t, jwt.SigningMethodEdDSA, edKey(), "", claims("x", "admin"))), "Unsupported algorithm: EdDSA"},
		{"ES256", bearer(sign(t, jwt.SigningMethodES256, ec, "", claims("x", "admin"))), "Unsupported algorithm: ES256"},
	} {
		wantRefused(t, c.name, call(t, s, "GET", adminRoute, c.authz, nil), http.StatusUnauthorized, c.msg)
	}
}

// JWT_JWKS_URL: keys are fetched at start and picked by kid, RSA and
// Ed25519 alike; a rotated key (a new kid) is fetched at its first token.
func TestJWKSPicksKeysByKidAndFollowsRotation(t *testing.T) {
	t.Parallel()
	j := newJWKS(t, 0, rsaJWK("rsa-1", rsaKey()), edJWK("ed-1", edKey()))
	s := e2e.Start(t, "JWT_ENABLED=true", "JWT_ALGORITHM=auto", "JWT_JWKS_URL="+j.URL)
	admin := claims("x", "admin")
	wantAdmitted(t, "rsa-1", call(t, s, "GET", adminRoute, bearer(sign(t, jwt.SigningMethodRS256, rsaKey(), "rsa-1", admin)), nil))
	wantAdmitted(t, "ed-1", call(t, s, "GET", adminRoute, bearer(sign(t, jwt.SigningMethodEdDSA, edKey(), "ed-1", admin)), nil))
	wantRefused(t, "HS256 without a secret", call(t, s, "GET", adminRoute, bearer(hs256(t, admin)), nil),
		http.StatusUnauthorized, "Unsupported algorithm: HS256")
	if n := j.fetches.Load(); n != 1 {
		t.Fatalf("%d JWKS fetches after start, want 1", n)
	}

	j.set(t, rsaJWK("rsa-2", rsaKey2()))
	wantAdmitted(t, "rsa-2 after rotation", call(t, s, "GET", adminRoute, bearer(sign(t, jwt.SigningMethodRS256, rsaKey2(), "rsa-2", admin)), nil))
	if n := j.fetches.Load(); n != 2 {
		t.Fatalf("%d JWKS fetches after the rotation, want 2", n)
	}
}

// An unknown kid moments after a fetch gets no fetch of its own (one per
// 10 s at most, so made-up kids cannot hammer the key server) and is
// answered 503, retryable: it may be a key just published, which the next
// fetch finds, and a 401 would end the SDKs' consume loops. Once a fetch
// is allowed and finds no such key, it is 401 "Unknown key ID". A key
// published meanwhile is served as soon as a fetch brings it.
func TestJWKSUnknownKIDWithinThePeriodIsRetryable(t *testing.T) {
	t.Parallel()
	j := newJWKS(t, 0, rsaJWK("rsa-1", rsaKey()))
	s := e2e.Start(t, "JWT_ENABLED=true", "JWT_ALGORITHM=RS256", "JWT_JWKS_URL="+j.URL)
	admin := claims("x", "admin")
	wantRefused(t, "made-up kid", call(t, s, "GET", adminRoute, bearer(sign(t, jwt.SigningMethodRS256, rsaKey(), "made-up", admin)), nil),
		http.StatusUnauthorized, "Unknown key ID: made-up")
	j.set(t, rsaJWK("rsa-1", rsaKey()), rsaJWK("rsa-2", rsaKey2()))
	rotated := bearer(sign(t, jwt.SigningMethodRS256, rsaKey2(), "rsa-2", admin))
	wantRefused(t, "a rotated key moments after a fetch", call(t, s, "GET", adminRoute, rotated, nil),
		http.StatusServiceUnavailable, "Unknown key ID: rsa-2 (the key set is fetched again within seconds; retry)")
	if n := j.fetches.Load(); n != 2 {
		t.Fatalf("%d JWKS fetches, want 2: at start and for the made-up kid", n)
	}
	err := e2e.Eventually(15*time.Second, 500*time.Millisecond, func() error {
		if r := call(t, s, "GET", adminRoute, rotated, nil); r.status != http.StatusOK {
			return fmt.Errorf("%d %s", r.status, r.body)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the rotated key was never served: %v", err)
	}
}

// §1.2: when the JWKS cannot be fetched, a token whose key is not cached is
// 500 "Failed to fetch JWKS" (the server's fault, not the token's).
func TestJWKSDownIs500(t *testing.T) {
	t.Parallel()
	j := newJWKS(t, http.StatusServiceUnavailable)
	s := e2e.Start(t, "JWT_ENABLED=true", "JWT_ALGORITHM=RS256", "JWT_JWKS_URL="+j.URL, "JWT_JWKS_TIMEOUT_MS=2000")
	token := bearer(sign(t, jwt.SigningMethodRS256, rsaKey(), "rsa-1", claims("x", "admin")))
	wantRefused(t, "JWKS down", call(t, s, "GET", adminRoute, token, nil), http.StatusInternalServerError, "Failed to fetch JWKS")
	// The next token, moments later, gets no fetch of its own: still a
	// server-side refusal, retryable, not a 401.
	wantRefused(t, "JWKS down, again", call(t, s, "GET", adminRoute, token, nil), http.StatusServiceUnavailable, "Unknown key ID: rsa-1 (the key set is fetched again within seconds; retry)")
}

// Invalid settings stop the broker at start with a message naming the
// variable, as the rest of the configuration does.
func TestInvalidSettingStopsTheBrokerAtStart(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env  []string
		name string
	}{
		{[]string{"JWT_ENABLED=true"}, "JWT_SECRET"},
		{[]string{"JWT_ENABLED=true", "JWT_ALGORITHM=RS256"}, "JWT_ALGORITHM"},
		{[]string{"JWT_ENABLED=true", "JWT_ALGORITHM=RS256", "JWT_PUBLIC_KEY=not a key"}, "JWT_PUBLIC_KEY"},
	} {
		s, err := e2e.StartURL(e2e.DB.URL, c.env...)
		if err == nil {
			s.Stop()
			t.Fatalf("%v: the broker started", c.env)
		}
		if !strings.Contains(err.Error(), "invalid "+c.name+"=") {
			t.Fatalf("%v: %v, want a message naming %s", c.env, err, c.name)
		}
	}
}
