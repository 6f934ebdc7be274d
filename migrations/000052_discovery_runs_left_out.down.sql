ALTER TABLE discovery_runs DROP COLUMN left_out, DROP COLUMN left_out_names;
