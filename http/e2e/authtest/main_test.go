// Package authtest holds the black-box tests of JWT authentication and
// access levels (docs/api.md "Authentication": tokens, roles and each route's level; issue
// 11): brokers started with JWT_ENABLED=true and HS256, RS256 and EdDSA
// tokens minted here, sent as the Queen SDKs send them, `Authorization:
// Bearer <token>`. Every test is named after the rule it checks.
package authtest

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/queengo/queengo/http/e2e"
)

func TestMain(m *testing.M) { e2e.Main(m, "authtest") }

// The HS256 settings of the shared broker, and the iss and aud every token
// carries unless a test says otherwise.
const (
	secret   = "authtest-secret-at-least-32-bytes-long"
	issuer   = "https://idp.authtest.example"
	audience = "queengo-authtest"
)

// hsEnv is the environment of the shared HS256 broker.
var hsEnv = []string{"JWT_ENABLED=true", "JWT_SECRET=" + secret, "JWT_ISSUER=" + issuer, "JWT_AUDIENCE=" + audience}

// hsBroker is the broker most tests share: HS256, issuer and audience set,
// the reference defaults otherwise (30 s of clock skew).
func hsBroker(t *testing.T) *e2e.Server {
	t.Helper()
	return e2e.Shared(t, hsEnv...)
}

// claims are the claims of a valid token for role, valid for an hour.
func claims(sub, role string) jwt.MapClaims {
	now := time.Now()
	c := jwt.MapClaims{"iss": issuer, "aud": audience, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	if sub != "" {
		c["sub"] = sub
	}
	if role != "" {
		c["role"] = role
	}
	return c
}

// sign mints a token; key is the HMAC secret ([]byte) or a private key,
// kid ("" for none) goes to the header.
func sign(t testing.TB, method jwt.SigningMethod, key any, kid string, c jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, c)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// hs256 mints an HS256 token with the shared broker's secret.
func hs256(t testing.TB, c jwt.MapClaims) string {
	t.Helper()
	return sign(t, jwt.SigningMethodHS256, []byte(secret), "", c)
}

// Keys are made once per run: an RSA key takes a while under -race.
var (
	rsaKey  = sync.OnceValue(func() *rsa.PrivateKey { return must(rsa.GenerateKey(rand.Reader, 2048)) })
	rsaKey2 = sync.OnceValue(func() *rsa.PrivateKey { return must(rsa.GenerateKey(rand.Reader, 2048)) })
	edKey   = sync.OnceValue(func() ed25519.PrivateKey {
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			panic(err)
		}
		return k
	})
)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// publicPEM is JWT_PUBLIC_KEY for key's public half.
func publicPEM(t testing.TB, key crypto.Signer) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// reply is a finished exchange.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// errorText is the "error" of a JSON error body, failing the test when the
// body is not one or is not sent as application/json.
func (r reply) errorText(t testing.TB) string {
	t.Helper()
	var e struct {
		Error *string `json:"error"`
	}
	if err := json.Unmarshal(r.body, &e); err != nil || e.Error == nil {
		t.Fatalf("%d: body %q is not {\"error\": ...}", r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%d %q: Content-Type %q", r.status, r.body, ct)
	}
	return *e.Error
}

// call sends a request with the Authorization header authz ("" for none);
// body is marshalled unless it is nil or a string.
func call(t testing.TB, s *e2e.Server, method, path, authz string, body any) reply {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, s.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	resp, err := e2e.Client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{resp.StatusCode, resp.Header, data}
}

// bearer is the header the SDKs send for a token.
func bearer(token string) string { return "Bearer " + token }

// wantRefused checks a refusal: its status, its JSON error, and the
// WWW-Authenticate challenge of a 401.
func wantRefused(t testing.TB, what string, r reply, status int, msg string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: status %d %s, want %d %q", what, r.status, r.body, status, msg)
	}
	if got := r.errorText(t); got != msg && !(strings.HasSuffix(msg, "*") && strings.HasPrefix(got, strings.TrimSuffix(msg, "*"))) {
		t.Fatalf("%s: error %q, want %q", what, got, msg)
	}
	if status == http.StatusUnauthorized && r.header.Get("WWW-Authenticate") != "Bearer" {
		t.Fatalf("%s: 401 without WWW-Authenticate: Bearer", what)
	}
}

// wantAdmitted checks that a request passed the check: any status but 401
// and 403 (the route's own answer).
func wantAdmitted(t testing.TB, what string, r reply) {
	t.Helper()
	if r.status == http.StatusUnauthorized || r.status == http.StatusForbidden {
		t.Fatalf("%s: refused %d %s", what, r.status, r.body)
	}
}

// jwksServer serves a JWK Set on 127.0.0.1 that a test may replace
// (rotation) and counts the fetches.
type jwksServer struct {
	*httptest.Server
	keys    atomic.Pointer[[]byte]
	fetches atomic.Int64
	status  int // answer with this status instead, when not 0
}

func newJWKS(t testing.TB, status int, keys ...jwk) *jwksServer {
	t.Helper()
	j := &jwksServer{status: status}
	j.set(t, keys...)
	j.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		j.fetches.Add(1)
		if j.status != 0 {
			http.Error(w, "down", j.status)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(*j.keys.Load())
	}))
	t.Cleanup(j.Close)
	return j
}

// set replaces the served keys.
func (j *jwksServer) set(t testing.TB, keys ...jwk) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		t.Fatal(err)
	}
	j.keys.Store(&b)
}

// jwk is one key of a JWK Set (RFC 7517, 8037).
type jwk map[string]string

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func rsaJWK(kid string, k *rsa.PrivateKey) jwk {
	return jwk{"kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig",
		"n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes())}
}

func edJWK(kid string, k ed25519.PrivateKey) jwk {
	return jwk{"kty": "OKP", "crv": "Ed25519", "kid": kid, "alg": "EdDSA", "use": "sig",
		"x": b64(k.Public().(ed25519.PublicKey))}
}
