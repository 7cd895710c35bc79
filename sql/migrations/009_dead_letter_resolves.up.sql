-- 009: a dead letter resolves its offset for its group (D5) only while the
-- cursor that dead-lettered it stands. A consumer-group delete, and a seek
-- that moves the cursor to before it, clear resolves: the group (or its
-- next incarnation, starting from the beginning) meets the message again,
-- as with the reference server, whose dead-letter rows never hide a message.
-- The dead letter stays listed, and a group that dead-letters the offset
-- again makes it resolve once more (queen.dead_letter).
ALTER TABLE queen.dead_letters ADD COLUMN IF NOT EXISTS resolves boolean NOT NULL DEFAULT true;
