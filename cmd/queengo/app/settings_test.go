package app

import (
	"crypto/ed25519"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/queengo/queengo"
	"github.com/queengo/queengo/pg"
)

// jwtOn enables authentication with the fewest settings.
var jwtOn = map[string]string{"JWT_ENABLED": "true", "JWT_SECRET": "x"}

func mustLoad(t *testing.T, kv map[string]string) *Config {
	t.Helper()
	c, err := LoadConfig(nil, env(kv))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Every exported field of Config (and of the structs it holds) shows in
// the settings: changing any one of them changes what Settings renders. A
// setting added to Config without a line in settingsOf fails here.
func TestSettings_EveryFieldIsShown(t *testing.T) {
	t.Parallel()
	base := settingsOf(mustLoad(t, jwtOn))
	durationType := reflect.TypeFor[time.Duration]()
	var walk func(typ reflect.Type, path []int, name string)
	walk = func(typ reflect.Type, path []int, name string) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			if !f.IsExported() {
				continue
			}
			p, n := append(append([]int(nil), path...), i), name+"."+f.Name
			ft := f.Type
			if ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				walk(ft, p, n)
				continue
			}
			c := mustLoad(t, jwtOn)
			v := reflect.ValueOf(c).Elem()
			for _, j := range p {
				if v.Kind() == reflect.Pointer {
					v = v.Elem()
				}
				v = v.Field(j)
			}
			switch {
			case v.Type() == durationType:
				v.SetInt(v.Int() + int64(time.Hour))
			case v.CanInt():
				v.SetInt(v.Int() + 1)
			case v.CanFloat():
				v.SetFloat(v.Float() + 0.5)
			case v.Kind() == reflect.String:
				v.SetString(v.String() + "x")
			case v.Kind() == reflect.Bool:
				v.SetBool(!v.Bool())
			case v.Type() == reflect.TypeFor[[]byte]():
				if v.Len() > 0 {
					v.SetBytes(nil)
				} else {
					v.SetBytes(make([]byte, 32))
				}
			case v.Type() == reflect.TypeFor[[][]byte]():
				v.Set(reflect.Append(v, reflect.ValueOf(make([]byte, 32))))
			case v.Type() == reflect.TypeFor[[]string]():
				v.Set(reflect.Append(v, reflect.ValueOf("/x")))
			case v.Kind() == reflect.Interface:
				v.Set(reflect.ValueOf(ed25519.PublicKey(make([]byte, ed25519.PublicKeySize))))
			default:
				t.Fatalf("Config%s is a %s: teach this test to change one", n, v.Type())
			}
			if reflect.DeepEqual(settingsOf(c), base) {
				t.Errorf("Config%s does not show in the settings: add it to settingsOf", n)
			}
		}
	}
	walk(reflect.TypeFor[Config](), nil, "")
}

// No secret of the configuration shows in its settings, in any form:
// database passwords (in the URL and as a parameter), the JWT secret, the
// encryption keys; the keys' ids do.
func TestSettings_SecretsAreHidden(t *testing.T) {
	t.Parallel()
	key, prev1, prev2 := strings.Repeat("ab", 32), strings.Repeat("cd", 32), strings.Repeat("EF", 32)
	c := mustLoad(t, map[string]string{
		"DATABASE_URL":                  "postgres://app:db-pass-1@db.example:5432/queen?sslmode=require&password=db-pass-2",
		"JWT_ENABLED":                   "true",
		"JWT_SECRET":                    "jwt-secret-3",
		"QUEEN_ENCRYPTION_KEY":          key,
		"QUEEN_ENCRYPTION_KEY_PREVIOUS": prev1 + "," + prev2,
	})
	b, err := json.Marshal(c.Settings())
	if err != nil {
		t.Fatal(err)
	}
	out := string(b)
	for _, s := range []string{"db-pass-1", "db-pass-2", "jwt-secret-3", key, prev1, prev2, strings.ToLower(prev2)} {
		if strings.Contains(out, s) {
			t.Errorf("the settings show %q: %s", s, out)
		}
	}
	got := map[string]queengo.Setting{}
	for _, s := range c.Settings() {
		got[s.Name] = s
	}
	want := map[string]string{
		"DATABASE_URL":                  "postgres://app:xxxxx@db.example:5432/queen?password=xxxxx&sslmode=require",
		"JWT_SECRET":                    "(hidden)",
		"QUEEN_ENCRYPTION_KEY":          "(hidden, key id " + pg.KeyID(c.EncryptionKey) + ")",
		"QUEEN_ENCRYPTION_KEY_PREVIOUS": "(hidden, 2 keys, ids " + pg.KeyID(c.EncryptionReadKeys[0]) + ", " + pg.KeyID(c.EncryptionReadKeys[1]) + ")",
	}
	for name, v := range want {
		if got[name].Value != v {
			t.Errorf("%s = %q, want %q", name, got[name].Value, v)
		}
	}
	for _, name := range []string{"JWT_SECRET", "QUEEN_ENCRYPTION_KEY", "QUEEN_ENCRYPTION_KEY_PREVIOUS"} {
		if !got[name].Secret || got[name].Default != "" {
			t.Errorf("%s: %+v, want a secret without a default", name, got[name])
		}
	}
}

// Both forms of a connection string lose their passwords, and nothing else.
func TestSettings_DatabaseURLPasswords(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://u@h:5432/db":                                 "postgres://u@h:5432/db",
		"postgresql://u:p%20w@h1,h2/db?target_session_attrs=any": "postgresql://u:xxxxx@h1,h2/db?target_session_attrs=any",
		"postgres://h/db?user=u&PASSWORD=pw&sslpassword=k":       "postgres://h/db?PASSWORD=xxxxx&sslpassword=xxxxx&user=u",
		"host=h user=u password=secret dbname=q":                 "host=h user=u password=xxxxx dbname=q",
		"host=h password = 'a b\\' c' sslpassword=k port=5":      "host=h password=xxxxx sslpassword=xxxxx port=5",
		"postgres://u:pw@[::1:5432/db":                           "(hidden)",
	} {
		if got := hideDatabaseURL(in); got != want {
			t.Errorf("hideDatabaseURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// A configuration of an environment that sets nothing is its defaults;
// the JWT_* settings show only with authentication on, and then default
// to the reference server's.
func TestSettings_DefaultsAreAnEmptyEnvironment(t *testing.T) {
	t.Parallel()
	for _, s := range mustLoad(t, nil).Settings() {
		if strings.HasPrefix(s.Name, "JWT_") && s.Name != "JWT_ENABLED" {
			t.Errorf("%s is shown with authentication off", s.Name)
		}
		if s.Value != s.Default {
			t.Errorf("%s = %q in an empty environment, its default %q", s.Name, s.Value, s.Default)
		}
	}
	got := map[string]queengo.Setting{}
	for _, s := range mustLoad(t, map[string]string{"JWT_ENABLED": "true", "JWT_SECRET": "x", "DB_POOL_SIZE": "7"}).Settings() {
		got[s.Name] = s
	}
	for name, want := range map[string]queengo.Setting{
		"DB_POOL_SIZE":               {Name: "DB_POOL_SIZE", Value: "7", Default: "20"},
		"JWT_ENABLED":                {Name: "JWT_ENABLED", Value: "true", Default: "false"},
		"JWT_ALGORITHM":              {Name: "JWT_ALGORITHM", Value: "HS256", Default: "HS256"},
		"JWT_CLOCK_SKEW":             {Name: "JWT_CLOCK_SKEW", Value: "30", Default: "30"},
		"JWT_SKIP_PATHS":             {Name: "JWT_SKIP_PATHS", Value: JWTSkipPathsDefault, Default: JWTSkipPathsDefault},
		"DB_POOL_ACQUIRE_TIMEOUT_MS": {Name: "DB_POOL_ACQUIRE_TIMEOUT_MS", Value: "5000", Default: "5000"},
	} {
		if got[name] != want {
			t.Errorf("%s: %+v, want %+v", name, got[name], want)
		}
	}
}
