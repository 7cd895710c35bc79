package app

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rsa"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/queengo/queengo"
	"github.com/queengo/queengo/pg"
)

// hidden stands for a secret that is set.
const hidden = "(hidden)"

// urlSecret stands for a password inside a URL, as url.URL.Redacted
// writes it: "(hidden)" would be percent-encoded there.
const urlSecret = "xxxxx"

// Settings renders the configuration the process runs with
// (GET /api/v1/system/config): one entry per environment variable, in the
// README's order, each with its default, the value of an environment that
// sets nothing. The JWT_* settings but JWT_ENABLED are listed only when
// authentication is on, since only then are they read. Secrets are never
// rendered: the JWT secret and the encryption keys show as "(hidden...)"
// (a key with its id, which the logs report too), a password inside
// DATABASE_URL or JWT_JWKS_URL as xxxxx.
func (c *Config) Settings() []queengo.Setting {
	out := settingsOf(c)
	defaults := defaultSettings()
	for i := range out {
		if !out[i].Secret {
			out[i].Default = defaults[out[i].Name]
		}
	}
	return out
}

// defaultSettings are the settings of an environment that sets nothing,
// by name; the JWT_* ones those of an environment that only enables
// authentication.
var defaultSettings = sync.OnceValue(func() map[string]string {
	out := map[string]string{}
	env := map[string]string{"JWT_ENABLED": "true", "JWT_SECRET": "x"}
	for _, get := range []func(string) string{func(k string) string { return env[k] }, func(string) string { return "" }} {
		c, err := LoadConfig(nil, get)
		if err != nil {
			panic("app: the default configuration does not load: " + err.Error())
		}
		for _, s := range settingsOf(c) {
			out[s.Name] = s.Value
		}
	}
	return out
})

// settingsOf renders c without defaults.
func settingsOf(c *Config) []queengo.Setting {
	var out []queengo.Setting
	add := func(name, value string) { out = append(out, queengo.Setting{Name: name, Value: value}) }
	secret := func(name, value string) {
		out = append(out, queengo.Setting{Name: name, Value: value, Secret: true})
	}
	ms := func(name string, d time.Duration) { add(name, strconv.FormatInt(d.Milliseconds(), 10)) }
	sec := func(name string, d time.Duration) { add(name, strconv.FormatInt(int64(d/time.Second), 10)) }
	num := func(name string, n int64) { add(name, strconv.FormatInt(n, 10)) }

	num("PORT", int64(c.Port))
	add("HOST", c.Host)
	add("DATABASE_URL", hideDatabaseURL(c.DatabaseURL))
	add("PG_USE_SSL", c.PGUseSSL)
	add("PG_SSL_REJECT_UNAUTHORIZED", strconv.FormatBool(c.PGSSLRejectUnauthorized))
	num("DB_POOL_SIZE", int64(c.PoolSize))
	ms("DB_POOL_ACQUIRE_TIMEOUT_MS", c.PoolAcquireTimeout)
	ms("DB_STATEMENT_TIMEOUT_MS", c.StatementTimeout)
	ms("DB_REQUEST_TIMEOUT_MS", c.RequestTimeout)
	ms("DB_CONNECTION_TIMEOUT", c.ConnectTimeout)
	ms("DB_LOCK_TIMEOUT", c.LockTimeout)
	ms("DB_IDLE_TIMEOUT", c.IdleInTransactionTimeout)
	sec("DB_KEEPALIVES_IDLE", c.KeepAliveIdle)
	sec("DB_KEEPALIVES_INTERVAL", c.KeepAliveInterval)
	num("DB_KEEPALIVES_COUNT", int64(c.KeepAliveCount))
	ms("DB_TCP_USER_TIMEOUT_MS", c.TCPUserTimeout)
	ms("DEFAULT_TIMEOUT", c.PopTimeout)
	num("DEFAULT_BATCH_SIZE", int64(c.PopBatch))
	add("DEFAULT_SUBSCRIPTION_MODE", c.PopSubscriptionMode)
	ms("POP_WAIT_INITIAL_INTERVAL_MS", c.PopWaitInitial)
	num("POP_WAIT_BACKOFF_THRESHOLD", int64(c.PopWaitThreshold))
	add("POP_WAIT_BACKOFF_MULTIPLIER", strconv.FormatFloat(c.PopWaitMultiplier, 'g', -1, 64))
	ms("POP_WAIT_MAX_INTERVAL_MS", c.PopWaitMax)
	ms("SHUTDOWN_TIMEOUT_MS", c.ShutdownTimeout)
	ms("HTTP_READ_TIMEOUT_MS", c.ReadTimeout)
	add("LOG_LEVEL", strings.ToLower(c.LogLevel.String()))
	add("PPROF_ADDR", c.PprofAddr)
	ms("RETENTION_INTERVAL", c.RetentionInterval)
	ms("EVICTION_INTERVAL", c.EvictionInterval)
	num("RETENTION_BATCH_SIZE", int64(c.RetentionBatchSize))
	num("EVICTION_BATCH_SIZE", int64(c.EvictionBatchSize))
	num("PARTITION_CLEANUP_DAYS", int64(c.PartitionCleanupDays))
	ms("METRICS_SAMPLE_INTERVAL_MS", c.MetricsSampleInterval)
	num("METRICS_RETENTION_DAYS", int64(c.MetricsRetentionDays))
	secret("QUEEN_ENCRYPTION_KEY", hideKeys(c.EncryptionKey))
	secret("QUEEN_ENCRYPTION_KEY_PREVIOUS", hideKeys(c.EncryptionReadKeys...))
	add("FILE_BUFFER_DIR", c.FileBufferDir)
	add("QUEENGO_CITUS", c.Citus)
	num("FILE_BUFFER_EVENTS_PER_FILE", int64(c.FileBuffer.EventsPerFile))
	num("FILE_BUFFER_FILE_BYTES", c.FileBuffer.FileBytes)
	num("FILE_BUFFER_MAX_BYTES", c.FileBuffer.MaxBytes)
	num("FILE_BUFFER_MAX_BATCH", int64(c.FileBufferMaxBatch))
	ms("FILE_BUFFER_FLUSH_MS", c.FileBufferFlush)
	num("SEGMENT_MAX_BYTES", int64(c.SegmentMaxBytes))
	num("SEGMENT_MAX_ITEMS", int64(c.SegmentMaxItems))
	add("JWT_ENABLED", strconv.FormatBool(c.Auth != nil))
	if a := c.Auth; a != nil {
		add("JWT_ALGORITHM", a.Algorithm)
		if len(a.Secret) > 0 {
			secret("JWT_SECRET", hidden)
		} else {
			secret("JWT_SECRET", "")
		}
		add("JWT_PUBLIC_KEY", describeKey(a.PublicKey))
		add("JWT_JWKS_URL", hideURLPassword(a.JWKSURL))
		add("JWT_ISSUER", a.Issuer)
		add("JWT_AUDIENCE", a.Audience)
		sec("JWT_CLOCK_SKEW", a.ClockSkew)
		add("JWT_ALLOW_NO_EXP", strconv.FormatBool(a.AllowNoExp))
		sec("JWT_MAX_TOKEN_AGE", a.MaxTokenAge)
		sec("JWT_JWKS_REFRESH_INTERVAL", a.JWKSRefresh)
		ms("JWT_JWKS_TIMEOUT_MS", a.JWKSTimeout)
		add("JWT_ROLES_CLAIM", a.RolesClaim)
		add("JWT_ROLES_ARRAY_CLAIM", a.RolesArrayClaim)
		add("JWT_ROLE_ADMIN", a.RoleAdmin)
		add("JWT_ROLE_READ_WRITE", a.RoleReadWrite)
		add("JWT_ROLE_READ_ONLY", a.RoleReadOnly)
		add("JWT_SKIP_PATHS", strings.Join(a.SkipPaths, ","))
	}
	return out
}

// hideKeys stands for encryption keys: how many, and their ids
// (pg.KeyID); "" for none.
func hideKeys(keys ...[]byte) string {
	var ids []string
	for _, k := range keys {
		if k != nil {
			ids = append(ids, pg.KeyID(k))
		}
	}
	switch len(ids) {
	case 0:
		return ""
	case 1:
		return "(hidden, key id " + ids[0] + ")"
	}
	return fmt.Sprintf("(hidden, %d keys, ids %s)", len(ids), strings.Join(ids, ", "))
}

// describeKey names a JWT verification key (public, but long).
func describeKey(k crypto.PublicKey) string {
	switch k := k.(type) {
	case nil:
		return ""
	case *rsa.PublicKey:
		return fmt.Sprintf("(RSA public key, %d bits)", k.N.BitLen())
	case ed25519.PublicKey:
		return "(Ed25519 public key)"
	}
	return fmt.Sprintf("(%T)", k)
}

// dsnPassword finds the password parameters of a keyword/value connection
// string (host=... password=...), quoted or not.
var dsnPassword = regexp.MustCompile(`(?i)\b((?:ssl)?password)\s*=\s*(?:'(?:[^'\\]|\\.)*'|[^\s']\S*)`)

// hideDatabaseURL hides the passwords of a connection string, in either of
// the forms PostgreSQL (and pgx) accept: a URL, whose password and
// password parameters become xxxxx, or keyword/value pairs, whose
// password values do. Anything else is hidden whole.
func hideDatabaseURL(s string) string {
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		if err != nil {
			return hidden
		}
		hidePassword(u)
		q := u.Query()
		for k := range q {
			if strings.EqualFold(k, "password") || strings.EqualFold(k, "sslpassword") {
				q.Set(k, urlSecret)
			}
		}
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsnPassword.ReplaceAllString(s, "${1}="+urlSecret)
}

// hideURLPassword hides the password of a URL; an unparsable one is hidden
// whole.
func hideURLPassword(s string) string {
	if s == "" {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil {
		return hidden
	}
	hidePassword(u)
	return u.String()
}

func hidePassword(u *url.URL) {
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), urlSecret)
	}
}
