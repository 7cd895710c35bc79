package statustest

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/queengo/queengo/http/e2e"
)

// bearer sends every request of an e2e.Server with a token.
type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return e2e.Client.Transport.RoundTrip(r)
}

// GET /api/v1/system/config: the settings this broker process runs with,
// each with its default, for the admin role only, and none of its secrets:
// the database password (PostgreSQL's trust authentication here ignores
// it), the JWT secret and the encryption key.
func TestSystemConfig_SettingsWithSecretsHidden(t *testing.T) {
	t.Parallel()
	const dbPassword, jwtSecret = "e2e-db-password", "statustest-jwt-secret"
	key := strings.Repeat("5a", 32)
	db := e2e.CreateDB(t, "config")
	u, err := url.Parse(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), dbPassword)
	s := e2e.StartWith(t, e2e.StartOpts{DatabaseURL: u.String(), Env: []string{"DB_POOL_SIZE=3",
		"METRICS_RETENTION_DAYS=3", "QUEEN_ENCRYPTION_KEY=" + key, "JWT_ENABLED=true", "JWT_SECRET=" + jwtSecret}})
	as := func(role string) *e2e.Server {
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "ops", "role": role,
			"exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(jwtSecret))
		if err != nil {
			t.Fatal(err)
		}
		return s.WithClient(&http.Client{Timeout: 30 * time.Second, Transport: bearer(tok)})
	}

	e2e.WantError(t, s.Get(t, "/api/v1/system/config"), 401, "Authentication required")
	e2e.WantError(t, as("read-write").Get(t, "/api/v1/system/config"), 403, "Insufficient permissions")
	r := as("admin").Get(t, "/api/v1/system/config")
	if r.Status != 200 {
		t.Fatalf("as admin: %d %s", r.Status, r.Body)
	}
	for _, secret := range []string{dbPassword, jwtSecret, key, strings.ToUpper(key)} {
		if strings.Contains(string(r.Body), secret) {
			t.Fatalf("the answer shows the secret %q: %s", secret, r.Body)
		}
	}
	var cfg struct {
		Instance string `json:"instance"`
		Version  string `json:"version"`
		Settings []struct {
			Name    string `json:"name"`
			Value   string `json:"value"`
			Default string `json:"default"`
			Secret  bool   `json:"secret"`
		} `json:"settings"`
	}
	r.JSON(t, &cfg)
	if !strings.HasSuffix(cfg.Instance, ":"+portOf(t, s)) || cfg.Version == "" {
		t.Fatalf("instance %q version %q", cfg.Instance, cfg.Version)
	}
	got := map[string]string{}
	for _, st := range cfg.Settings {
		got[st.Name] = st.Value + " | " + st.Default
		if st.Secret && st.Default != "" {
			t.Errorf("the secret %s has a default %q", st.Name, st.Default)
		}
	}
	hiddenURL := strings.Replace(u.String(), dbPassword, "xxxxx", 1)
	for name, want := range map[string]string{
		"DB_POOL_SIZE":           "3 | 20",
		"METRICS_RETENTION_DAYS": "3 | 7",
		"DEFAULT_BATCH_SIZE":     "1 | 1",
		"JWT_ENABLED":            "true | false",
		"JWT_SECRET":             "(hidden) | ",
		"DATABASE_URL":           hiddenURL + " | postgres://postgres@localhost:5432/postgres",
	} {
		if got[name] != want {
			t.Errorf("%s: %q, want %q", name, got[name], want)
		}
	}
	if v := got["QUEEN_ENCRYPTION_KEY"]; !strings.HasPrefix(v, "(hidden, key id ") {
		t.Errorf("QUEEN_ENCRYPTION_KEY: %q", v)
	}
}
