package pg

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// popMaintenanceKey is the system_state row of the pop maintenance switch.
const popMaintenanceKey = "pop_maintenance_mode"

// PopMaintenance reports whether pop maintenance is on.
func (s *Store) PopMaintenance(ctx context.Context) (bool, error) {
	var on bool
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		return c.QueryRow(ctx, `SELECT coalesce((SELECT (value->>'enabled')::boolean FROM queen.system_state WHERE key = $1), false)`,
			popMaintenanceKey).Scan(&on)
	})
	if err != nil {
		return false, fmt.Errorf("error reading pop maintenance: %w", err)
	}
	return on, nil
}

// SetPopMaintenance switches pop maintenance on or off for every broker
// process on this database.
func (s *Store) SetPopMaintenance(ctx context.Context, on bool) error {
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		_, err := c.Exec(ctx, `INSERT INTO queen.system_state (key, value) VALUES ($1, jsonb_build_object('enabled', $2::boolean))
ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()`, popMaintenanceKey, on)
		return err
	})
	if err != nil {
		return fmt.Errorf("error setting pop maintenance: %w", err)
	}
	return nil
}

// TimeZone reports the session time zone PostgreSQL formats createdAt in.
func (s *Store) TimeZone(ctx context.Context) (string, error) {
	var tz string
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		return c.QueryRow(ctx, "SHOW timezone").Scan(&tz)
	})
	return tz, err
}
