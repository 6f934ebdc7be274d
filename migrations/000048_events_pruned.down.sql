DROP TABLE IF EXISTS events_pruned;
