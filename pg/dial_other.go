//go:build !linux

package pg

import (
	"errors"
	"syscall"
	"time"
)

// setUserTimeout fails: TCP_USER_TIMEOUT is Linux's.
func setUserTimeout(syscall.RawConn, time.Duration) error {
	return errors.New("TCP_USER_TIMEOUT (DB_TCP_USER_TIMEOUT_MS) is supported on Linux only")
}
