-- tool.call.failed (a call that ran and did not succeed, result failure) is in the
-- "calls" group with tool.call. On a first upgrade no row has that action, so no row
-- changes group and the index built on the function (audit_log_group_idx) stays right;
-- after a downgrade and this again, rows of it exist and the index is rebuilt.
CREATE OR REPLACE FUNCTION audit_action_group(action text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN action IN ('user.login', 'user.login_failed', 'user.logout', 'request.denied')
            OR action LIKE 'token.%' OR action LIKE 'session.%' THEN 'auth'
        WHEN action LIKE 'user.%' THEN 'users'
        WHEN action LIKE 'server.%' THEN 'servers'
        WHEN action IN ('tool.call', 'tool.call.refused', 'tool.call.failed', 'resource.read', 'prompt.get', 'terminal.input')
            OR action LIKE 'memory.%' OR action LIKE 'todo.%' THEN 'calls'
        WHEN action LIKE 'tool.%' OR action LIKE 'category.%' THEN 'tools'
        WHEN action IN ('execution.approve', 'execution.approve.refused', 'execution.reject')
            OR action LIKE 'grant.%' OR action LIKE 'collaboration.%' THEN 'approvals'
        WHEN action LIKE 'execution.%' THEN 'executions'
        WHEN action LIKE 'secret.%' OR action LIKE 'secrets.%' THEN 'secrets'
        WHEN action LIKE 'settings.%' THEN 'settings'
        WHEN action LIKE 'audit.%' THEN 'audit'
        ELSE 'other'
    END
$$;

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM audit_log WHERE action = 'tool.call.failed') THEN
        REINDEX INDEX audit_log_group_idx;
    END IF;
END
$$;
