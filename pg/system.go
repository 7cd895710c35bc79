package pg

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The system_state rows of the maintenance switches: pop maintenance, and
// push maintenance (the reference server's maintenance_mode).
const (
	popMaintenanceKey  = "pop_maintenance_mode"
	pushMaintenanceKey = "maintenance_mode"
)

// PopMaintenance reports whether pop maintenance is on.
func (s *Store) PopMaintenance(ctx context.Context) (bool, error) {
	on, err := s.readSwitch(ctx, popMaintenanceKey)
	if err != nil {
		return false, fmt.Errorf("error reading pop maintenance: %w", err)
	}
	return on, nil
}

// SetPopMaintenance switches pop maintenance on or off for every broker
// process on this database.
func (s *Store) SetPopMaintenance(ctx context.Context, on bool) error {
	if err := s.writeSwitch(ctx, popMaintenanceKey, on); err != nil {
		return fmt.Errorf("error setting pop maintenance: %w", err)
	}
	return nil
}

// PushMaintenance reports whether push maintenance is on: pushes go to the
// brokers' file buffers (D11).
func (s *Store) PushMaintenance(ctx context.Context) (bool, error) {
	on, err := s.readSwitch(ctx, pushMaintenanceKey)
	if err != nil {
		return false, fmt.Errorf("error reading push maintenance: %w", err)
	}
	return on, nil
}

// SetPushMaintenance switches push maintenance on or off for every broker
// process on this database.
func (s *Store) SetPushMaintenance(ctx context.Context, on bool) error {
	if err := s.writeSwitch(ctx, pushMaintenanceKey, on); err != nil {
		return fmt.Errorf("error setting push maintenance: %w", err)
	}
	return nil
}

// readSwitch reads a system_state switch; a missing row is off.
func (s *Store) readSwitch(ctx context.Context, key string) (bool, error) {
	var on bool
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		return c.QueryRow(ctx, `SELECT coalesce((SELECT (value->>'enabled')::boolean FROM queen.system_state WHERE key = $1), false)`,
			key).Scan(&on)
	})
	return on, err
}

// writeSwitch stores a system_state switch.
func (s *Store) writeSwitch(ctx context.Context, key string, on bool) error {
	return s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		_, err := c.Exec(ctx, `INSERT INTO queen.system_state (key, value) VALUES ($1, jsonb_build_object('enabled', $2::boolean))
ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at`, key, on)
		return err
	})
}

// TimeZone reports the session time zone PostgreSQL formats createdAt in.
func (s *Store) TimeZone(ctx context.Context) (string, error) {
	var tz string
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		return c.QueryRow(ctx, "SHOW timezone").Scan(&tz)
	})
	return tz, err
}
