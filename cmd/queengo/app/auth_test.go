package app

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// authEnv is the environment of a broker with JWT on, plus kv.
func authEnv(kv map[string]string) func(string) string {
	m := map[string]string{"JWT_ENABLED": "true"}
	for k, v := range kv {
		m[k] = v
	}
	return env(m)
}

func publicPEM(t *testing.T, key any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// TestAuth_OffUnlessEnabled: without JWT_ENABLED=true nothing is read, not
// even an invalid JWT_ALGORITHM.
func TestAuth_OffUnlessEnabled(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"", "false", "0"} {
		cfg, err := LoadConfig(nil, env(map[string]string{"JWT_ENABLED": v, "JWT_ALGORITHM": "none"}))
		if err != nil || cfg.Auth != nil {
			t.Errorf("JWT_ENABLED=%q: auth %+v, err %v; want off", v, cfg.Auth, err)
		}
	}
}

// TestAuth_ReferenceDefaults: HS256, 30 s of skew, hourly JWKS refresh with
// a 5 s timeout, roles role/roles with admin, read-write, read-only, and
// the skip paths /health, /metrics/prometheus, /metrics, /.
func TestAuth_ReferenceDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := LoadConfig(nil, authEnv(map[string]string{"JWT_SECRET": "s3cret"}))
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.Auth
	if a == nil || a.Algorithm != "HS256" || string(a.Secret) != "s3cret" || a.ClockSkew != 30*time.Second ||
		a.JWKSRefresh != time.Hour || a.JWKSTimeout != 5*time.Second || a.RolesClaim != "role" ||
		a.RolesArrayClaim != "roles" || a.RoleAdmin != "admin" || a.RoleReadWrite != "read-write" ||
		a.RoleReadOnly != "read-only" || a.Issuer != "" || a.Audience != "" ||
		!reflect.DeepEqual(a.SkipPaths, []string{"/health", "/metrics/prometheus", "/metrics", "/"}) {
		t.Fatalf("defaults %+v", a)
	}
}

// TestAuth_VariablesAreRead: every JWT_* variable lands in the config.
func TestAuth_VariablesAreRead(t *testing.T) {
	t.Parallel()
	cfg, err := LoadConfig(nil, authEnv(map[string]string{"JWT_ALGORITHM": "RS256", "JWT_JWKS_URL": "https://idp.example.com/jwks",
		"JWT_JWKS_REFRESH_INTERVAL": "600", "JWT_JWKS_TIMEOUT_MS": "1500", "JWT_ISSUER": "idp", "JWT_AUDIENCE": "queen",
		"JWT_CLOCK_SKEW": "0", "JWT_ROLES_CLAIM": "r", "JWT_ROLES_ARRAY_CLAIM": "rs", "JWT_ROLE_ADMIN": "A",
		"JWT_ROLE_READ_WRITE": "W", "JWT_ROLE_READ_ONLY": "R", "JWT_SKIP_PATHS": " /a , /b/ ,"}))
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.Auth
	if a.Algorithm != "RS256" || a.JWKSURL != "https://idp.example.com/jwks" || a.JWKSRefresh != 10*time.Minute ||
		a.JWKSTimeout != 1500*time.Millisecond || a.Issuer != "idp" || a.Audience != "queen" || a.ClockSkew != 0 ||
		a.RolesClaim != "r" || a.RolesArrayClaim != "rs" || a.RoleAdmin != "A" || a.RoleReadWrite != "W" ||
		a.RoleReadOnly != "R" || !reflect.DeepEqual(a.SkipPaths, []string{"/a", "/b/"}) {
		t.Fatalf("config %+v", a)
	}
}

// TestAuth_PublicKeyPEM: JWT_PUBLIC_KEY holds an RSA key for RS*, an
// Ed25519 key for EdDSA, either for auto; a literal \n is a newline.
func TestAuth_PublicKeyPEM(t *testing.T) {
	t.Parallel()
	rk, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	ek, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsaPEM, edPEM := publicPEM(t, &rk.PublicKey), publicPEM(t, ek)
	for _, c := range []struct {
		alg, pem string
		want     any
	}{
		{"RS256", rsaPEM, &rk.PublicKey},
		{"RS512", strings.ReplaceAll(rsaPEM, "\n", `\n`), &rk.PublicKey},
		{"EdDSA", edPEM, ek},
		{"auto", edPEM, ek},
		{"auto", rsaPEM, &rk.PublicKey},
	} {
		cfg, err := LoadConfig(nil, authEnv(map[string]string{"JWT_ALGORITHM": c.alg, "JWT_PUBLIC_KEY": c.pem}))
		if err != nil {
			t.Errorf("%s: %v", c.alg, err)
			continue
		}
		if !reflect.DeepEqual(cfg.Auth.PublicKey, c.want) {
			t.Errorf("%s: key %T", c.alg, cfg.Auth.PublicKey)
		}
	}
	for alg, key := range map[string]string{"RS256": edPEM, "EdDSA": rsaPEM} {
		_, err := LoadConfig(nil, authEnv(map[string]string{"JWT_ALGORITHM": alg, "JWT_PUBLIC_KEY": key}))
		var ce *configError
		if !errors.As(err, &ce) || ce.name != "JWT_PUBLIC_KEY" || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s with the other key type: %v, want a one-line error naming JWT_PUBLIC_KEY", alg, err)
		}
	}
}

// TestAuth_InvalidCombinationNamesVariable: a setting that cannot work
// stops the broker at start with an error naming the variable to fix.
func TestAuth_InvalidCombinationNamesVariable(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env  map[string]string
		name string
	}{
		{map[string]string{"JWT_ENABLED": "yes"}, "JWT_ENABLED"},
		{map[string]string{}, "JWT_SECRET"},
		{map[string]string{"JWT_ALGORITHM": "HS512"}, "JWT_SECRET"},
		{map[string]string{"JWT_ALGORITHM": "none", "JWT_SECRET": "s"}, "JWT_ALGORITHM"},
		{map[string]string{"JWT_ALGORITHM": "ES256", "JWT_SECRET": "s"}, "JWT_ALGORITHM"},
		{map[string]string{"JWT_ALGORITHM": "RS256"}, "JWT_ALGORITHM"},
		{map[string]string{"JWT_ALGORITHM": "EdDSA"}, "JWT_ALGORITHM"},
		{map[string]string{"JWT_ALGORITHM": "auto"}, "JWT_ALGORITHM"},
		{map[string]string{"JWT_ALGORITHM": "RS256", "JWT_SECRET": "s", "JWT_JWKS_URL": "http://idp/jwks"}, "JWT_SECRET"},
		{map[string]string{"JWT_SECRET": "s", "JWT_JWKS_URL": "http://idp/jwks"}, "JWT_ALGORITHM"},
		{map[string]string{"JWT_ALGORITHM": "RS256", "JWT_PUBLIC_KEY": "x", "JWT_JWKS_URL": "http://idp/jwks"}, "JWT_JWKS_URL"},
		{map[string]string{"JWT_ALGORITHM": "RS256", "JWT_JWKS_URL": "idp/jwks"}, "JWT_JWKS_URL"},
		{map[string]string{"JWT_ALGORITHM": "RS256", "JWT_PUBLIC_KEY": "not a pem"}, "JWT_PUBLIC_KEY"},
		{map[string]string{"JWT_SECRET": "s", "JWT_CLOCK_SKEW": "-1"}, "JWT_CLOCK_SKEW"},
		{map[string]string{"JWT_SECRET": "s", "JWT_CLOCK_SKEW": "30s"}, "JWT_CLOCK_SKEW"},
		{map[string]string{"JWT_SECRET": "s", "JWT_JWKS_REFRESH_INTERVAL": "0"}, "JWT_JWKS_REFRESH_INTERVAL"},
		{map[string]string{"JWT_SECRET": "s", "JWT_JWKS_TIMEOUT_MS": "0"}, "JWT_JWKS_TIMEOUT_MS"},
		{map[string]string{"JWT_SECRET": "s", "JWT_SKIP_PATHS": "/health,metrics"}, "JWT_SKIP_PATHS"},
	} {
		_, err := LoadConfig(nil, authEnv(c.env))
		var ce *configError
		if !errors.As(err, &ce) || ce.name != c.name {
			t.Errorf("%v: error %v, want one naming %s", c.env, err, c.name)
		}
		if err != nil && strings.Contains(err.Error(), `"s"`) {
			t.Errorf("%v: the error shows the secret: %v", c.env, err)
		}
	}
}
