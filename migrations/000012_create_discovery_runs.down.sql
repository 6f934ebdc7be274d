DROP TABLE discovery_runs;
