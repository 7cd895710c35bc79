package queengo

// Setting is one setting of a broker process's configuration, as the
// operator's route GET /api/v1/system/config shows it: the environment
// variable that sets it, the value the process runs with, written as that
// variable is (milliseconds for the *_MS variables, ...), and the value it
// has when nothing sets it. A secret (a password, the JWT secret, the
// encryption keys) is never shown: Value is "(hidden...)" when it is set,
// "" when not.
type Setting struct {
	Name    string `json:"name"`
	Value   string `json:"value"`
	Default string `json:"default"`
	Secret  bool   `json:"secret,omitempty"`
}
