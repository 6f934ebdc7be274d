-- Which signed checkpoint each recorded check of the chain had to reach (or why there was
-- none), so every replica and a restarted server show it, not only the process that ran it.
ALTER TABLE audit_verifications
    ADD COLUMN checkpoint    text NOT NULL DEFAULT '',
    ADD COLUMN checkpoint_id bigint NOT NULL DEFAULT 0;
