-- A check of the chain from the page or the API is recorded when it starts, not only
-- when it ends, so every replica shows the running one and how far it got, and a Verify
-- on another replica does not start a second. finished_at is NULL while it runs;
-- progress_at is when its replica last said how far it got (a row running with no word
-- for a minute was left by a replica that stopped).
ALTER TABLE audit_verifications
    ALTER COLUMN finished_at DROP NOT NULL,
    ADD COLUMN total       bigint NOT NULL DEFAULT 0,
    ADD COLUMN progress_at timestamptz;
