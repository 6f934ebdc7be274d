-- Tools a discovery could not store (a name too long, not UTF-8 or holding a control
-- character): how many, and the first few as "name: why", shown with the run.
ALTER TABLE discovery_runs
    ADD COLUMN left_out integer NOT NULL DEFAULT 0,
    ADD COLUMN left_out_names text[] NOT NULL DEFAULT '{}';
