-- Back to migration 27's groups; rows of tool.call.failed move to "tools", so the
-- index built on the function is rebuilt (it blocks writes to audit_log meanwhile).
CREATE OR REPLACE FUNCTION audit_action_group(action text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN action IN ('user.login', 'user.login_failed', 'user.logout', 'request.denied')
            OR action LIKE 'token.%' OR action LIKE 'session.%' THEN 'auth'
        WHEN action LIKE 'user.%' THEN 'users'
        WHEN action LIKE 'server.%' THEN 'servers'
        WHEN action IN ('tool.call', 'tool.call.refused', 'resource.read', 'prompt.get', 'terminal.input')
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

REINDEX INDEX audit_log_group_idx;
