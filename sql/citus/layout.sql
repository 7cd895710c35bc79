-- layout.sql: the Citus mode of the schema (docs/scaling.md). Applied by the
-- migration runner after the migrations, when the database has the citus
-- extension (or QUEENGO_CITUS=on), before the function files; idempotent.
--
-- queen.citus_layout is the one list of where every table lives. A new table
-- gets one row here in the same change as its migration:
--   reference    small, shared, read by every node: copied to each node,
--                written with two-phase commit (queues, subscriptions,
--                system state);
--   distributed  per partition: sharded by its partition id column and
--                co-located with queen.partitions, so a partition's rows of
--                every table live in one shard group on one node;
--   local        stays on the coordinator only (the metrics history): a
--                Citus local table, so it may still join reference tables.
-- Rows apply in ord order: a reference table before the distributed tables
-- whose foreign keys name it, queen.partitions before its co-located tables.
CREATE TABLE IF NOT EXISTS queen.citus_layout (
    ord       integer PRIMARY KEY,
    -- a name, not a regclass: Citus may swap a table's relation for a
    -- shard of the same name's shell table as it converts it.
    tbl       text NOT NULL UNIQUE,
    kind      text NOT NULL CHECK (kind IN ('reference', 'distributed', 'local')),
    dist_col  text,
    CHECK ((kind = 'distributed') = (dist_col IS NOT NULL))
);

INSERT INTO queen.citus_layout (ord, tbl, kind, dist_col) VALUES
    (10,  'queen.queues',           'reference',   NULL),
    (20,  'queen.subscriptions',    'reference',   NULL),
    (30,  'queen.system_state',     'reference',   NULL),
    (40,  'queen.metrics_samples',  'local',       NULL),
    (50,  'queen_streams.queries',  'reference',   NULL),
    (100, 'queen.partitions',       'distributed', 'id'),
    (110, 'queen.segments',         'distributed', 'partition_id'),
    (120, 'queen.txids',            'distributed', 'partition_id'),
    (130, 'queen.cursors',          'distributed', 'partition_id'),
    (140, 'queen.attempts',         'distributed', 'partition_id'),
    (150, 'queen.dead_letters',     'distributed', 'partition_id'),
    (160, 'queen.tombstones',       'distributed', 'partition_id'),
    (170, 'queen.traces',           'distributed', 'partition_id'),
    (180, 'queen.trace_names',      'distributed', 'partition_id'),
    (190, 'queen.trace_name_stats', 'distributed', 'partition_id'),
    (200, 'queen_streams.state',    'distributed', 'partition_id')
ON CONFLICT (ord) DO UPDATE SET tbl = EXCLUDED.tbl, kind = EXCLUDED.kind, dist_col = EXCLUDED.dist_col;

-- Constraints Citus cannot keep across shards, re-designed before the
-- tables are distributed (how each invariant still holds: docs/scaling.md,
-- "Constraints"):
--
-- * UNIQUE (queue_id, name) of queen.partitions lacks the distribution
--   column. A partition's id is a function of its queue and name instead
--   (queen.partition_key, pg/queues.go's ensurePartition), and the check
--   below keeps every row to it, so the primary key on id is the uniqueness
--   of (queue_id, name).
-- * the primary keys on id alone of queen.dead_letters and queen.traces
--   become (partition_id, id): every id is a random version-4 uuid, unique
--   by construction as everywhere else in the schema.
-- * the statement trigger partitions_cascade (a delete of partitions
--   removes their segments, transaction ids and cursors) would run a
--   multi-shard delete from inside a shard; foreign keys with ON DELETE
--   CASCADE between co-located tables do the same on each shard.
ALTER TABLE queen.partitions DROP CONSTRAINT IF EXISTS partitions_queue_id_name_key;
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'partitions_key_is_name') THEN
        ALTER TABLE queen.partitions ADD CONSTRAINT partitions_key_is_name
            CHECK (id = queen.partition_key(queue_id, name)) NOT VALID;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'dead_letters_pkey'
                 AND conrelid = 'queen.dead_letters'::regclass AND array_length(conkey, 1) = 1) THEN
        ALTER TABLE queen.dead_letters DROP CONSTRAINT dead_letters_pkey;
        ALTER TABLE queen.dead_letters ADD PRIMARY KEY (partition_id, id);
    END IF;
    IF EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'traces_pkey'
                 AND conrelid = 'queen.traces'::regclass AND array_length(conkey, 1) = 1) THEN
        ALTER TABLE queen.traces DROP CONSTRAINT traces_pkey;
        ALTER TABLE queen.traces ADD PRIMARY KEY (partition_id, id);
    END IF;
    IF EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'partitions_cascade') THEN
        DROP TRIGGER partitions_cascade ON queen.partitions;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'segments_partition_id_fkey') THEN
        ALTER TABLE queen.segments ADD CONSTRAINT segments_partition_id_fkey
            FOREIGN KEY (partition_id) REFERENCES queen.partitions (id) ON DELETE CASCADE;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'txids_partition_id_fkey') THEN
        ALTER TABLE queen.txids ADD CONSTRAINT txids_partition_id_fkey
            FOREIGN KEY (partition_id) REFERENCES queen.partitions (id) ON DELETE CASCADE;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'cursors_partition_id_fkey') THEN
        ALTER TABLE queen.cursors ADD CONSTRAINT cursors_partition_id_fkey
            FOREIGN KEY (partition_id) REFERENCES queen.partitions (id) ON DELETE CASCADE;
    END IF;
END;
$$;

-- The tables are then distributed one statement each, in ord order, by the
-- migration runner (pg/migrate.go): the rows of queen.citus_layout that
-- pg_dist_partition does not list as the kind they name. A table Citus made
-- a local table on the way (it keeps tables linked by foreign keys to a
-- reference table on the coordinator) is converted.
