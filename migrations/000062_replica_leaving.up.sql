-- A replica that began shutting down says so (services/replicas.Leave): its listener is
-- closed, so other replicas stop forwarding terminals and test runs to it, while it
-- still counts as alive for what it is still finishing (its executions are not taken
-- over until its row stops being seen).
ALTER TABLE replicas ADD COLUMN leaving_at timestamptz;
