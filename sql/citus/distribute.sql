-- distribute.sql: which functions run whole on the node that owns their
-- partition (create_distributed_function, the partition id argument
-- co-located with queen.partitions). Applied last in the Citus mode;
-- idempotent (re-registering a function keeps it distributed).
SELECT create_distributed_function('queen.append_one(uuid, text[], uuid[], bytea[])', 'p_part',
                                   colocate_with => 'queen.partitions');
