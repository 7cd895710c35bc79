package authtest

import (
	"net/http"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/queengo/queengo/http/e2e"
)

// Issue 41, defect 6: a token without exp is refused by default (it was
// accepted forever, with any role); JWT_ALLOW_NO_EXP admits it for an
// identity provider that issues such tokens.
func TestTokenWithoutExpIsRefusedUnlessAllowed(t *testing.T) {
	t.Parallel()
	noExp := claims("x", "admin")
	delete(noExp, "exp")
	tok := bearer(hs256(t, noExp))
	wantRefused(t, "no exp", call(t, hsBroker(t), "GET", adminRoute, tok, nil), http.StatusUnauthorized,
		"Token has no expiration time (exp)")
	allowing := e2e.Start(t, append(hsEnv, "JWT_ALLOW_NO_EXP=true")...)
	wantAdmitted(t, "no exp with JWT_ALLOW_NO_EXP", call(t, allowing, "GET", adminRoute, tok, nil))
}

// Issue 41, defect 6: JWT_MAX_TOKEN_AGE refuses a token issued longer ago,
// whatever its exp, and a token without iat; a younger token is admitted.
func TestTokenOlderThanTheMaximumAgeIsRefused(t *testing.T) {
	t.Parallel()
	s := e2e.Start(t, append(hsEnv, "JWT_MAX_TOKEN_AGE=60", "JWT_CLOCK_SKEW=0")...)
	now := time.Now()
	old := with(claims("x", "admin"), jwt.MapClaims{"iat": now.Add(-2 * time.Minute).Unix()})
	wantRefused(t, "issued 2 min ago", call(t, s, "GET", adminRoute, bearer(hs256(t, old)), nil), http.StatusUnauthorized,
		"Token is older than the maximum token age")
	noIat := claims("x", "admin")
	delete(noIat, "iat")
	wantRefused(t, "no iat", call(t, s, "GET", adminRoute, bearer(hs256(t, noIat)), nil), http.StatusUnauthorized,
		"Token has no issue time (iat), which the maximum token age needs")
	wantAdmitted(t, "issued now", call(t, s, "GET", adminRoute, bearer(hs256(t, claims("x", "admin"))), nil))
}
