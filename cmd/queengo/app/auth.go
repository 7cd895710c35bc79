package app

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	qhttp "github.com/queengo/queengo/http"
)

// JWT defaults: the reference server's.
const (
	// JWTAlgorithmDefault is the token algorithm when JWT_ALGORITHM is unset.
	JWTAlgorithmDefault = "HS256"
	// JWTClockSkewDefault is the tolerance of the exp, nbf and iat checks.
	JWTClockSkewDefault = 30 * time.Second
	// JWTJWKSRefreshDefault: identity providers rotate keys in days, and an
	// unknown kid triggers a fetch of its own.
	JWTJWKSRefreshDefault = time.Hour
	// JWTJWKSTimeoutDefault bounds one JWKS fetch.
	JWTJWKSTimeoutDefault = 5 * time.Second
	// JWTSkipPathsDefault: the routes that are public anyway, and "/".
	JWTSkipPathsDefault = "/health,/metrics/prometheus,/metrics,/"
)

// jwtAlgorithms are the JWT_ALGORITHM values.
var jwtAlgorithms = []string{"HS256", "HS384", "HS512", "RS256", "RS384", "RS512", "EdDSA", "auto"}

// loadAuth reads the JWT_* variables into c.Auth, which stays nil unless
// JWT_ENABLED is true. Other JWT_* variables are not read when it is not.
func loadAuth(e *envReader, c *Config) {
	enabled := false
	e.bool("JWT_ENABLED", &enabled)
	if !enabled {
		return
	}
	a := &qhttp.AuthConfig{
		Algorithm: JWTAlgorithmDefault, JWKSRefresh: JWTJWKSRefreshDefault, JWKSTimeout: JWTJWKSTimeoutDefault,
		ClockSkew: JWTClockSkewDefault, RolesClaim: "role", RolesArrayClaim: "roles",
		RoleAdmin: "admin", RoleReadWrite: "read-write", RoleReadOnly: "read-only",
	}
	e.str("JWT_ALGORITHM", &a.Algorithm)
	a.Secret = []byte(e.get("JWT_SECRET"))
	pem := e.get("JWT_PUBLIC_KEY")
	e.str("JWT_JWKS_URL", &a.JWKSURL)
	e.str("JWT_ISSUER", &a.Issuer)
	e.str("JWT_AUDIENCE", &a.Audience)
	e.seconds("JWT_CLOCK_SKEW", &a.ClockSkew)
	e.bool("JWT_ALLOW_NO_EXP", &a.AllowNoExp)
	e.seconds("JWT_MAX_TOKEN_AGE", &a.MaxTokenAge)
	e.seconds("JWT_JWKS_REFRESH_INTERVAL", &a.JWKSRefresh)
	e.millis("JWT_JWKS_TIMEOUT_MS", &a.JWKSTimeout)
	e.str("JWT_ROLES_CLAIM", &a.RolesClaim)
	e.str("JWT_ROLES_ARRAY_CLAIM", &a.RolesArrayClaim)
	e.str("JWT_ROLE_ADMIN", &a.RoleAdmin)
	e.str("JWT_ROLE_READ_WRITE", &a.RoleReadWrite)
	e.str("JWT_ROLE_READ_ONLY", &a.RoleReadOnly)
	skip := JWTSkipPathsDefault
	e.str("JWT_SKIP_PATHS", &skip)
	for p := range strings.SplitSeq(skip, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if p[0] != '/' {
			e.fail("JWT_SKIP_PATHS", skip, "each path must start with /")
		}
		a.SkipPaths = append(a.SkipPaths, p)
	}
	e.check(checkKeys(a, pem))
	switch {
	case e.err != nil:
	case a.JWKSRefresh <= 0:
		e.fail("JWT_JWKS_REFRESH_INTERVAL", "0", "want at least 1 second")
	case a.JWKSTimeout <= 0:
		e.fail("JWT_JWKS_TIMEOUT_MS", "0", "want more than 0")
	}
	c.Auth = a
}

// checkKeys checks that the keys configured are the ones JWT_ALGORITHM
// verifies with, no more and no fewer, and parses JWT_PUBLIC_KEY into a.
func checkKeys(a *qhttp.AuthConfig, pem string) *configError {
	var hs, rs, ed bool // the algorithm families verified
	switch a.Algorithm {
	case "HS256", "HS384", "HS512":
		hs = true
	case "RS256", "RS384", "RS512":
		rs = true
	case "EdDSA":
		ed = true
	case "auto":
		hs, rs, ed = true, true, true
	default:
		return &configError{"JWT_ALGORITHM", a.Algorithm, "want one of " + strings.Join(jwtAlgorithms, ", ")}
	}
	secret, public := len(a.Secret) > 0, pem != "" || a.JWKSURL != ""
	switch {
	case pem != "" && a.JWKSURL != "":
		return &configError{"JWT_JWKS_URL", a.JWKSURL, "set JWT_PUBLIC_KEY or JWT_JWKS_URL, not both"}
	case secret && !hs:
		return &configError{"JWT_SECRET", "(hidden)", "JWT_ALGORITHM " + a.Algorithm + " does not use it: unset it"}
	case public && !rs && !ed:
		return &configError{"JWT_ALGORITHM", a.Algorithm, "does not use JWT_PUBLIC_KEY or JWT_JWKS_URL: unset them, or choose RS256, EdDSA or auto"}
	case !secret && !public && hs && !rs:
		return &configError{"JWT_SECRET", "", "required when JWT_ALGORITHM is " + a.Algorithm}
	case !secret && !public && hs:
		return &configError{"JWT_ALGORITHM", a.Algorithm, "needs JWT_SECRET, JWT_PUBLIC_KEY or JWT_JWKS_URL"}
	case !public && !hs:
		return &configError{"JWT_ALGORITHM", a.Algorithm, "needs JWT_PUBLIC_KEY or JWT_JWKS_URL"}
	case a.JWKSURL != "" && !isHTTPURL(a.JWKSURL):
		return &configError{"JWT_JWKS_URL", a.JWKSURL, "want an http:// or https:// URL"}
	case pem == "":
		return nil
	}
	// A literal \n stands for a newline, as in a one-line env file.
	b := []byte(strings.ReplaceAll(pem, `\n`, "\n"))
	if rs {
		if k, err := jwt.ParseRSAPublicKeyFromPEM(b); err == nil {
			a.PublicKey = k
			return nil
		}
	}
	if ed {
		if k, err := jwt.ParseEdPublicKeyFromPEM(b); err == nil {
			a.PublicKey = k
			return nil
		}
	}
	want := "an RSA"
	switch {
	case rs && ed:
		want = "an RSA or Ed25519"
	case ed:
		want = "an Ed25519"
	}
	return &configError{"JWT_PUBLIC_KEY", firstLine(pem), "want " + want + " public key in PEM"}
}

// firstLine shortens a PEM for an error message.
func firstLine(s string) string {
	if i := strings.IndexAny(s, "\n\\"); i >= 0 {
		return s[:i] + "..."
	}
	return s
}

func isHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// check records err unless an error came first.
func (e *envReader) check(err *configError) {
	if err != nil && e.err == nil {
		e.err = err
	}
}

func (e *envReader) str(name string, dst *string) {
	if v := strings.TrimSpace(e.get(name)); v != "" {
		*dst = v
	}
}

func (e *envReader) bool(name string, dst *bool) {
	v := strings.TrimSpace(e.get(name))
	if v == "" {
		return
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		e.fail(name, v, "want true or false")
		return
	}
	*dst = b
}

func (e *envReader) seconds(name string, dst *time.Duration) {
	v := strings.TrimSpace(e.get(name))
	if v == "" {
		return
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		e.fail(name, v, "want a whole number of seconds")
		return
	}
	*dst = time.Duration(n) * time.Second
}
