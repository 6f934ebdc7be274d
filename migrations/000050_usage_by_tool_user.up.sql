-- A person's own calls of a built-in tool (its Logs tab without audit.view), found
-- without reading every call of the tool: an agent's busiest tool has millions.
CREATE INDEX tool_usage_logs_tool_user_time_idx ON tool_usage_logs (tool_id, user_id, used_at DESC, id DESC);
